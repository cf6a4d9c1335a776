"""The demo program runs end to end on its embedded defaults."""

import os
import sys
import zygote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_demo_prints_releases_and_guarantees():
    result = zygote.run(
        [sys.executable, os.path.join(ROOT, "train", "tfdptext-demo"),
         "--eta=100", "--max_length=24", "--skip_training"],
        capture_output=True, text=True, timeout=300, check=True)
    out = result.stdout
    assert "SYNTHETIC" in out
    assert "1-LDP per coordinate" in out
    assert "384-LDP per representation" in out
    assert "d = Euclidean distance between minilm token embeddings" in out
    assert "per bit" in out
