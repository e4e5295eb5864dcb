"""squad/graph.py: the TensorFlow twins of run_squad's windows, max-context
choice and get_final_text, each against the Python it mirrors over many
inputs; and the SQuAD serving module on rows where nothing can be
answered."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

import modeling
from runner_lib.serving import squad as squad_serving
from runner_lib.squad import data
from runner_lib.squad import features
from runner_lib.squad import graph
from runner_lib.squad import predictions
from runner_lib.squad import task as squad_task
import tokenization

# (doc_length, query_length, seq_length, doc_stride): empty documents,
# one window, several, a stride wider than a window (windows abut).
WINDOW_CASES = list(itertools.product([0, 1, 5, 9, 10, 11, 23, 40],
                                      [1, 4], [16], [1, 3, 8, 50]))


def test_doc_windows_are_doc_spans_for():
  doc_lengths, query_lengths, _, strides = zip(*WINDOW_CASES)
  for stride in sorted(set(strides)):
    rows = [c for c in WINDOW_CASES if c[3] == stride]
    example, start, length = graph.doc_windows(
        tf.constant([r[0] for r in rows], tf.int64),
        tf.constant([r[1] for r in rows], tf.int64), 16, stride)
    want = [(i, span.start, span.length) for i, r in enumerate(rows)
            for span in features.doc_spans_for(
                r[0], 16 - features.SPECIAL_TOKENS - r[1], stride)]
    assert list(zip(example.numpy(), start.numpy(), length.numpy())) == want
  assert doc_lengths.count(0) and query_lengths


def test_max_context_is_max_context_spans():
  rows = [c for c in WINDOW_CASES if c[0]]
  example, start, length = graph.doc_windows(
      tf.constant([r[0] for r in rows], tf.int64),
      tf.constant([r[1] for r in rows], tf.int64), 16, 3)
  first_piece = np.cumsum([0] + [r[0] for r in rows])[:-1]
  best = graph.max_context(start, length,
                           tf.gather(first_piece, example),
                           tf.constant(sum(r[0] for r in rows), tf.int64))
  best = [list(b) for b in best.numpy()]
  windows = list(zip(example.numpy(), start.numpy(), length.numpy()))
  for i, row in enumerate(rows):
    spans = [features.DocSpan(start=s, length=n) for e, s, n in windows
             if e == i]
    owner = features.max_context_spans(spans, row[0])
    mine = [w for w, (e, _, _) in enumerate(windows) if e == i]
    for index, (window, span) in enumerate(zip(mine, spans)):
      assert best[window] == [owner[p] == index for p in
                              range(span.start, span.start + span.length)]


# (pred_text, orig_text): aligned, cut inside a word, accents the lower
# case strips, a text the tokenizer splits, none found, punctuation.
FINAL_TEXT_CASES = [
    ("steve smith", "Steve Smith's"),
    ("smith", "Steve Smith's"),
    ("1854", "(1854–1856)"),
    ("cafe", "Café"),
    ("new york", "New-York"),
    ("boston", "Chicago"),
    ("u . s .", "U.S."),
    ("a", "a"),
]


@pytest.mark.parametrize("pred_text,orig_text", FINAL_TEXT_CASES)
def test_final_text_is_get_final_text(pred_text, orig_text):
  tok_text = " ".join(tokenization.BasicTokenizer(True).tokenize(orig_text))
  text, start = graph.final_text((tf.constant(pred_text),
                                  tf.constant(orig_text),
                                  tf.constant(tok_text)))
  text, start = text.numpy().decode("utf-8"), int(start)
  assert text == predictions.get_final_text(pred_text, orig_text, True)
  assert orig_text[start:start + len(text)] == text


def test_final_text_of_nothing_is_whole_and_does_not_fail():
  # The serving module calls it on every row, those without an answer too
  # (their text is dropped): empty texts must not fail the batch.
  for texts in (("", "", ""), ("", "a b", "a b"), ("a", "", "")):
    text, start = graph.final_text(tuple(tf.constant(t) for t in texts))
    assert (text.numpy().decode("utf-8"), int(start)) == (texts[1], 0)


WORDS = ["the", "cat", "sat", "on", "mat", "who", "where", "?", "."]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS


@pytest.mark.parametrize("version_2", [False, True])
def test_rows_without_an_answer_get_the_originals_and_leave_others_alone(
    tmp_path, version_2):
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("\n".join(VOCAB) + "\n")
  config = modeling.BertConfig(
      vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1,
      num_attention_heads=2, intermediate_size=32,
      max_position_embeddings=32, type_vocab_size=2)
  tf.random.set_seed(0)
  model = squad_task.SquadTask(config, 24).build_model()
  module = squad_serving.SquadModule(
      model, str(vocab_file), True, 24, doc_stride=4, max_query_length=6,
      n_best_size=5, max_answer_length=4, version_2_with_negative=version_2,
      null_score_diff_threshold=0.0)
  # No window (empty, only whitespace), then rows that have windows.
  questions = ["who sat ?", "where ?", "who sat ?", "where ?"]
  contexts = ["", " \t\n", "the cat sat on the mat .", "the mat ."]
  # Eagerly (the signature traces the same function): no trace to wait for.
  batch = module._serve(tf.constant(questions), tf.constant(contexts))
  for row in (2, 3):
    alone = module._serve(tf.constant(questions[row:row + 1]),
                         tf.constant(contexts[row:row + 1]))
    for key in batch:
      assert batch[key].numpy()[row] == alone[key].numpy()[0], key
  texts = [t.decode("utf-8") for t in batch["answer_text"].numpy()]
  starts = list(batch["answer_start"].numpy())
  # The original's nonce answer where no span is valid (SQuAD 1.1), the
  # null answer (2.0): nowhere in the context.
  assert texts[:2] == (["", ""] if version_2 else ["empty", "empty"])
  assert starts[:2] == [-1, -1]
  if version_2:
    assert [t.decode() for t in batch["best_non_null_text"].numpy()[:2]] == [
        "", ""]
  for text, start, context in zip(texts[2:], starts[2:], contexts[2:]):
    if start >= 0:
      assert context[start:start + len(text)] == text


def test_split_context_is_data_split_context():
  contexts = ["The cat  sat.", " \tlead and trail\n", "a\u202fb\r\nc", "",
              "   ", "one", "non\u00a0breaking stays in a word"]
  words, _ = graph.split_context(tf.constant(contexts))
  for got, context in zip(words.to_list(), contexts):
    assert [w.decode("utf-8") for w in got] == data.split_context(context)[0]
