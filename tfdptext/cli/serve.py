"""Serves an export's server model under TF Serving's REST API, and the page.

    tfdptext-serve --export_dir=exports/quickstart [--port=8501]
        [--max_rows=1000]

The same requests and answers as TensorFlow Serving for the export's
SavedModel (`POST /v1/models/NAME[/versions/N]:predict` with "instances"
or "inputs", `GET /v1/models/NAME[/versions/N][/metadata]`, errors as
{"error": "..."} with TF Serving's HTTP statuses; at most --max_rows rows
per request), so an app tested against
it works against TF Serving unchanged (docs/guides/export.md gives TF
Serving's command). It also serves the web client: open
http://HOST:PORT/#text=... to privatize a text in the browser with the
export's phone model and send only the release here (the text goes in the
URL's fragment, which the browser never sends; a `?text=` query is refused
with 400). --port=0 picks a free
port; the first line printed says where it listens.
"""

import os
import threading

from absl import flags

from tfdptext.cli import program
from tfdptext.rest import predict_json

FLAGS = flags.FLAGS
NAME = "tfdptext-serve"
# web/ of the checkout that holds this package.
DEFAULT_WEB_DIR = os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), "web")


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-serve's flags in `flag_values`."""
    flags.DEFINE_string("export_dir", None, "A tfdptext-export directory.",
                        required=True, flag_values=flag_values)
    flags.DEFINE_integer("port", 8501, "Port to listen on (TF Serving's "
                         "REST port is 8501; 0: any free port).",
                         lower_bound=0, upper_bound=65535,
                         flag_values=flag_values)
    flags.DEFINE_string("host", "127.0.0.1", "Address to listen on "
                        "(0.0.0.0: every interface).",
                        flag_values=flag_values)
    flags.DEFINE_integer("max_rows", predict_json.MAX_ROWS, "The most rows (texts) one "
                         "predict request may hold; a larger request is "
                         "refused with 400 (it bounds the work and the "
                         "answer's size).", lower_bound=1,
                         flag_values=flag_values)
    flags.DEFINE_string("web_dir", DEFAULT_WEB_DIR, "The web client's "
                        "folder (web/ of a checkout, after `npm ci` in it); "
                        "empty: serve the REST API only.",
                        flag_values=flag_values)


def serve(argv):
    """The program: loads the export, then serves until interrupted."""
    from tfdptext.errors import ArgumentError

    if len(argv) > 1:
        raise ArgumentError(f"Unexpected arguments {argv[1:]}: give "
                            "--export_dir (and --port).")
    from tfdptext.privacy import Guarantee
    from tfdptext.privacy import headline
    from tfdptext.rest import server

    model = server.ServedModel(FLAGS.export_dir)
    app = server.ServingApp(model, FLAGS.web_dir or None,
                            max_rows=FLAGS.max_rows)
    httpd = server.make_server(app, FLAGS.host, FLAGS.port)
    threading.Thread(target=app.warm, daemon=True).start()
    url = f"http://{FLAGS.host}:{httpd.server_port}"
    print(f"{NAME}: serving {url}/ (model {model.name}, version "
          f"{model.version})", flush=True)
    print("\n".join(headline.lines(Guarantee.from_dict(
        model.manifest["guarantee"]))))
    print(f"  REST: POST {url}/v1/models/{model.name}:predict "
          "(TF Serving's API)")
    print(f"  page: {url}/#text=... (the phone model runs in the browser; "
          "the text stays there, only the release is sent here)" if app.web_dir else
          "  page: none (--web_dir is empty)", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


def main():
    """The console entry point of tfdptext-serve."""
    define_flags()
    program.run(NAME, __name__, serve)


if __name__ == "__main__":
    main()
