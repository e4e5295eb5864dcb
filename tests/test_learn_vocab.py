"""learn_vocab.py: a usable WordPiece vocab from plain text."""

import pytest

import tokenization
from tests import conftest
from tests import stress_corpus

# End-to-end script runs: left out of make test-fast.
pytestmark = pytest.mark.slow


def run_script(args):
  # No TensorFlow on local files: it would cost more than the work.
  return conftest.run_script_without_tensorflow("learn_vocab.py", args,
                                                timeout=300)


def test_learned_vocab_is_usable(tmp_path):
  lines = stress_corpus.FRAGMENTS["english"] * 20 + stress_corpus.FRAGMENTS[
      "accents"] * 5 + ["中文分词测试 北京欢迎你"] * 5
  (tmp_path / "a.txt").write_text("\n".join(lines[:400]) + "\n")
  (tmp_path / "b.txt").write_text("\n".join(lines[400:]) + "\n")
  output = tmp_path / "out" / "vocab.txt"
  result = run_script(["--input_file=%s" % (tmp_path / "*.txt"),
                       "--output_file=%s" % output, "--vocab_size=300",
                       "--num_unused=3"])
  assert result.returncode == 0, result.stderr[-3000:]
  vocab = output.read_text().splitlines()
  assert "vocab_size = %d" % len(vocab) in result.stdout
  assert 200 < len(vocab) <= 300
  assert vocab[:8] == ["[PAD]", "[unused0]", "[unused1]", "[unused2]",
                       "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert len(set(vocab)) == len(vocab)
  assert "##" + "e" in vocab and "the" in vocab
  tokenizer = tokenization.FullTokenizer(str(output), do_lower_case=True)
  tokens = [t for line in lines for t in tokenizer.tokenize(line)]
  assert "[UNK]" not in tokens
  # Common words get whole-word entries; long rare ones are split.
  assert tokenizer.tokenize("the quick brown fox")[0] == "the"


def test_no_matching_input_is_an_error(tmp_path):
  result = run_script(["--input_file=%s" % (tmp_path / "none*.txt"),
                       "--output_file=%s" % (tmp_path / "v.txt")])
  assert result.returncode != 0
  assert "--input_file: no file matches" in result.stderr
  assert not (tmp_path / "v.txt").exists()
