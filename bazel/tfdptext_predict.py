"""Bazel main of //:tfdptext-predict: runs tfdptext.cli.predict.main."""

from tfdptext.cli import predict

if __name__ == "__main__":
    predict.main()
