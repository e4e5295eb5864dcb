"""CoNLL reading, IOB1 -> IOB2, word-piece sequences (long sentences,
document context) and entity scores: real CoNLL-2003 files against the
published counts, hand-worked cases."""

import os
import re

import numpy as np
import pytest

from runner_lib.core import errors
from runner_lib.ner import data
from runner_lib.ner import evaluation
from runner_lib.ner import features
import tokenization

# Tjong Kim Sang and De Meulder (2003), Tables 1 and 2: sentences, tokens,
# documents, and entities of each type.
PUBLISHED = {
    "train": (14041, 203621, 946,
              {"LOC": 7140, "MISC": 3438, "ORG": 6321, "PER": 6600}),
    "dev": (3250, 51362, 216,
            {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}),
    "test": (3453, 46435, 231,
             {"LOC": 1668, "MISC": 702, "ORG": 1661, "PER": 1617}),
}


@pytest.mark.parametrize("split", sorted(PUBLISHED))
def test_real_conll2003_counts(shared_data, split):
  sentences = data.get_examples(os.path.join(shared_data, "conll2003"), split)
  num_sentences, num_tokens, num_documents, entities = PUBLISHED[split]
  assert len(sentences) == num_sentences
  assert sum(len(s.words) for s in sentences) == num_tokens
  assert len({s.document for s in sentences}) == num_documents
  assert sentences[-1].document == num_documents - 1
  tags = [t for s in sentences for t in s.tags]
  # In IOB2 every entity opens with B-.
  assert {t: tags.count("B-" + t) for t in entities} == entities


def test_iob1_to_iob2_by_hand():
  # I- after O, and at the start, opens an entity.
  assert data.iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC"]) == [
      "B-PER", "I-PER", "O", "B-LOC"]
  # IOB1's B- separates adjacent entities of one type; after another type
  # I- opens one.
  assert data.iob1_to_iob2(["I-PER", "B-PER", "I-PER", "I-ORG", "I-ORG"]) == [
      "B-PER", "B-PER", "I-PER", "B-ORG", "I-ORG"]
  iob2 = ["B-MISC", "I-MISC", "O", "B-LOC", "B-LOC"]
  assert data.iob1_to_iob2(iob2) == iob2


def write(path, text):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text)
  return str(path)


def test_documents_sentences_and_file_names(tmp_path):
  write(tmp_path / "eng.testa",
        "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\n"
        "Peter NNP I-NP I-PER\n\n-DOCSTART- -X- O O\n\n"
        "BRUSSELS NNP I-NP I-LOC\n")
  sentences = data.get_examples(str(tmp_path), "dev")
  assert [(s.words, s.tags, s.document) for s in sentences] == [
      (["EU", "rejects"], ["B-ORG", "O"], 0), (["Peter"], ["B-PER"], 0),
      (["BRUSSELS"], ["B-LOC"], 1)]
  # dev.txt is preferred to eng.testa; two columns are enough.
  write(tmp_path / "dev.txt", "Paris B-LOC\n")
  assert data.get_examples(str(tmp_path), "dev")[0].words == ["Paris"]


@pytest.mark.parametrize("text,message", [
    ("EU I-ORG\nsaid O\n\nhe I-PR\n", "train.txt, line 4: tag 'B-PR' is not "
                                      "one of O, B-PER"),
    ("EU I-ORG\nsaid\n", "train.txt, line 2: one column ('said')"),
    ("", "train.txt holds no sentences."),
    ("-DOCSTART- -X- O O\n\n", "train.txt holds no sentences."),
])
def test_bad_files_name_file_and_line(tmp_path, text, message):
  write(tmp_path / "train.txt", text)
  with pytest.raises(errors.InputError, match=re.escape(message)):
    data.get_examples(str(tmp_path), "train")


def test_missing_split_names_both_file_names(tmp_path):
  with pytest.raises(errors.InputError,
                     match="has neither test.txt nor eng.testb"):
    data.get_examples(str(tmp_path), "test")


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "eu", "rejects", "german", "call",
         "to", "boy", "##cott", "british", "lamb", ".", "peter", "black",
         "##burn"]


@pytest.fixture
def tokenizer(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(VOCAB) + "\n")
  return tokenization.FullTokenizer(str(path), do_lower_case=True)


def ids(text):
  return [VOCAB.index(t) for t in text.split()]


SENTENCE = data.Sentence(
    "EU rejects German call to boycott British lamb .".split(),
    ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"], 0)


def test_first_piece_carries_the_label(tokenizer):
  (feature,), (span,) = features.convert_sentences(
      [SENTENCE], data.LABELS, 16, tokenizer)
  assert feature.input_ids == ids(
      "[CLS] eu rejects german call to boy ##cott british lamb . [SEP]") + [
          0] * 4
  assert feature.input_mask == [1] * 12 + [0] * 4
  assert feature.segment_ids == [0] * 16
  # "boycott" is pieces 6-7: its label (O) on 6, nothing on 7.
  assert span.positions == [1, 2, 3, 4, 5, 6, 8, 9, 10]
  assert feature.label_mask == [0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0,
                                0]
  misc = data.LABELS.index("B-MISC")
  assert feature.label_ids == [0, 3, 0, misc, 0, 0, 0, 0, misc, 0, 0] + [0] * 5


def test_long_sentence_is_split_at_words(tokenizer):
  # 10 pieces, at most 4 per sequence (max_seq_length 6): words of 1, 1,
  # 1, 1, 1, 2, 1, 1, 1 pieces.
  sequences, spans = features.convert_sentences([SENTENCE], data.LABELS, 6,
                                                tokenizer)
  assert [(s.word_start, s.word_end) for s in spans] == [(0, 4), (4, 7),
                                                         (7, 9)]
  assert [f.input_ids[:f.input_mask.count(1)] for f in sequences] == [
      ids("[CLS] eu rejects german call [SEP]"),
      ids("[CLS] to boy ##cott british [SEP]"),
      ids("[CLS] lamb . [SEP]")]
  # Every word is predicted exactly once, at its first piece.
  predicted = np.zeros([3, 6], np.int32)
  for row, span in enumerate(spans):
    for word, position in zip(range(span.word_start, span.word_end),
                              span.positions):
      predicted[row, position] = word + 1
  assert features.word_predictions([SENTENCE], spans, predicted) == [
      list(range(1, 10))]


def test_a_word_longer_than_a_sequence_keeps_its_first_piece(tokenizer):
  sentence = data.Sentence(["boycott", "EU"], ["O", "B-ORG"], 0)
  sequences, spans = features.convert_sentences([sentence], data.LABELS, 3,
                                                tokenizer)
  assert [f.input_ids for f in sequences] == [ids("[CLS] boy [SEP]"),
                                              ids("[CLS] eu [SEP]")]
  assert [s.positions for s in spans] == [[1], [1]]


def test_document_context_fills_both_sides(tokenizer):
  doc = [data.Sentence(["Peter", "Blackburn"], ["B-PER", "I-PER"], 0),
         data.Sentence(["EU", "rejects"], ["B-ORG", "O"], 0),
         data.Sentence(["German", "call", "."], ["B-MISC", "O", "O"], 0),
         data.Sentence(["British", "lamb"], ["B-MISC", "O"], 1)]
  # Pieces: peter black ##burn | eu rejects | german call . ; next document.
  sequences, spans = features.convert_sentences(doc, data.LABELS, 8,
                                                tokenizer,
                                                document_context=True)
  texts = [f.input_ids[:f.input_mask.count(1)] for f in sequences]
  # Room for 6 pieces. Sentence 0 has 3 and nothing on its left: 3 on the
  # right.
  assert texts[0] == ids("[CLS] peter black ##burn eu rejects german [SEP]")
  assert spans[0].positions == [1, 2]
  # Sentence 1 (2 pieces): 2 left, 2 right.
  assert texts[1] == ids("[CLS] black ##burn eu rejects german call [SEP]")
  assert spans[1].positions == [3, 4]
  # Sentence 2 (3 pieces), at its document's end: 3 on the left, the
  # context cut inside a word (it is context only).
  assert texts[2] == ids("[CLS] ##burn eu rejects german call . [SEP]")
  assert spans[2].positions == [4, 5, 6]
  # Sentence 3 is alone in its document.
  assert texts[3] == ids("[CLS] british lamb [SEP]")
  # Only the centre words are labelled.
  assert [sum(f.label_mask) for f in sequences] == [2, 2, 3, 2]
  assert sequences[1].label_ids[3] == data.LABELS.index("B-ORG")
  assert sequences[1].label_mask[1:3] == [0, 0]


def test_unknown_pieces_stand_in_for_an_empty_word(tokenizer):
  sentence = data.Sentence(["\u200b", "EU"], ["O", "B-ORG"], 0)
  (feature,), (span,) = features.convert_sentences([sentence], data.LABELS,
                                                   8, tokenizer)
  assert feature.input_ids[:4] == ids("[CLS] [UNK] eu [SEP]")
  assert span.positions == [1, 2]


def test_entity_scores_by_hand():
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-MISC"]]
  # Sentence 1: PER right; I-LOC after O opens a LOC entity (conlleval),
  # which matches. Sentence 2: ORG missed, MISC predicted as ORG.
  predicted = [["B-PER", "I-PER", "O", "I-LOC"], ["O", "O", "B-ORG"]]
  results = evaluation.eval_results(gold, predicted, data.LABELS)
  # 2 of 3 predicted entities right, 2 of 4 gold entities found.
  assert results["eval_precision"] == pytest.approx(2 / 3)
  assert results["eval_recall"] == pytest.approx(2 / 4)
  assert results["eval_f1"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
  assert results["eval_f1_PER"] == 1.0
  assert results["eval_f1_LOC"] == 1.0
  assert results["eval_f1_ORG"] == 0.0
  assert results["eval_f1_MISC"] == 0.0
  # A span cut short is a wrong entity, not half right.
  results = evaluation.eval_results([["B-PER", "I-PER"]], [["B-PER", "O"]],
                                    data.LABELS)
  assert results["eval_f1"] == 0.0


def test_conll_output_format(tmp_path):
  path = str(tmp_path / "eval_predictions.txt")
  evaluation.write_conll(path, [SENTENCE, data.Sentence(["Peter"], ["B-PER"],
                                                        0)],
                         [["O"] * 9, ["B-PER"]])
  lines = open(path).read().split("\n")
  assert lines[0] == "EU B-ORG O"
  assert lines[9] == ""
  assert lines[10:] == ["Peter B-PER B-PER", "", ""]
