"""Dynamic masking (runner_lib/pretraining/masking.py) against the rules of
the original's create_masked_lm_predictions and its own records."""

import os
import random

import numpy as np
import pytest
import tensorflow as tf

from runner_lib.core.inputs import input_pipeline
from runner_lib.core.inputs import tfrecord_writer
from runner_lib.pretraining import data as pretraining_data
from runner_lib.pretraining import instances
from runner_lib.pretraining import masking
from tests import test_create_pretraining_data as cpd

CLS, SEP, MASK = 101, 102, 103  # the uncased vocab's
# Passes of our masking over each of the oracle's records.
PASSES = 100
# A z-bound: a share off by more than Z standard errors fails (two-sided
# probability below 1e-6 per check under the null).
Z = 5.0


@pytest.mark.parametrize("prob", [0.15, 0.1, 0.2, 0.5, 0.3333])
def test_num_to_predict_rounds_as_python(prob):
  # Python's round() and tf.round both round halves to even (banker's):
  # 0.15 x 10 = 1.5 -> 2, x 30 = 4.5 -> 4, 0.5 x 5 = 2.5 -> 2.
  lengths = tf.range(1, 513)
  got = tf.map_fn(lambda n: masking.num_to_predict(n, prob, 20), lengths)
  want = [min(20, max(1, int(round(n * prob)))) for n in range(1, 513)]
  np.testing.assert_array_equal(got.numpy(), want)


def unmasked_oracle(shared_data, mode):
  """The original's records with their masks put back, their candidates
  (from the uncased vocab) and the original's own masks."""
  path = os.path.join(shared_data, "reference", "create_pretraining_data",
                      "sample_text_seed12345_%s.tfrecord" % mode)
  records = cpd.parse(cpd.records_of(path), 128, 20)
  with open(os.path.join(shared_data, "vocab", "uncased_vocab.txt")) as f:
    is_piece = np.array([line.startswith("##") for line in f])
  ids = records["input_ids"].copy()
  for row, (positions, labels, weights) in enumerate(zip(
      records["masked_lm_positions"], records["masked_lm_ids"],
      records["masked_lm_weights"])):
    real = weights > 0
    ids[row, positions[real]] = labels[real]
  candidates = np.where(is_piece[ids], instances.CONTINUATION,
                        instances.WORD_START)
  candidates[(ids == CLS) | (ids == SEP) | (records["input_mask"] == 0)] = 0
  return ids, candidates, records, len(is_piece)


def mask_many(ids, candidates, input_mask, wwm, passes=PASSES, seed=7):
  """Our masks: passes draws of every record, [passes * N, ...] arrays."""
  masker = masking.example_masker(seed, 0.15, 20, wwm, MASK, 30522)
  n = len(ids)
  examples = tf.data.Dataset.from_tensor_slices({
      "input_ids": np.tile(ids, [passes, 1]).astype(np.int32),
      "input_mask": np.tile(input_mask, [passes, 1]).astype(np.int32),
      "masked_lm_candidates": np.tile(candidates,
                                      [passes, 1]).astype(np.int32)})
  batches = examples.enumerate().map(lambda i, f: masker(f, i)).batch(
      passes * n)
  return {k: v.numpy() for k, v in next(iter(batches)).items()}


def units_of(ids_row, is_piece_row, mask_row):
  """The original's whole-word units of a record: lists of positions."""
  units = []
  for i, token in enumerate(ids_row):
    if token in (CLS, SEP) or not mask_row[i]:
      continue
    if units and is_piece_row[i]:
      units[-1].append(i)
    else:
      units.append([i])
  return units


def binomial_bound(p, n):
  return Z * np.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("mode", ["wp", "wwm"])
def test_rules_match_the_originals_records(shared_data, mode):
  wwm = mode == "wwm"
  ids, candidates, oracle, vocab_size = unmasked_oracle(shared_data, mode)
  n = len(ids)
  ours = mask_many(ids, candidates, oracle["input_mask"], wwm)
  tiled_ids = np.tile(ids, [PASSES, 1])
  lengths = oracle["input_mask"].sum(1)
  budget = np.minimum(20, np.maximum(1, np.round(lengths * 0.15))).astype(int)
  oracle_count = oracle["masked_lm_weights"].sum(1).astype(int)
  count = ours["masked_lm_weights"].sum(1).astype(int).reshape(PASSES, n)
  if not wwm:
    # One position per unit: always the budget, as the original's.
    np.testing.assert_array_equal(oracle_count, budget)
    np.testing.assert_array_equal(count, np.tile(budget, [PASSES, 1]))
  else:
    # A word that would overshoot is skipped: at most the budget, and the
    # original's count is among the counts our draws give.
    assert (count <= budget).all() and (oracle_count <= budget).all()
    for row in range(n):
      assert count[:, row].min() <= oracle_count[row] <= count[:, row].max()
    # Short of the budget about as often as the original (a z-bound on
    # the difference of two shares).
    p_ours = (count < budget).mean()
    p_oracle = (oracle_count < budget).mean()
    p = (p_ours * count.size + p_oracle * n) / (count.size + n)
    assert abs(p_ours - p_oracle) <= Z * np.sqrt(
        p * (1 - p) * (1 / count.size + 1 / n)) + 1e-9, (p_ours, p_oracle)

  # Sorted positions, padded with 0, never [CLS] or [SEP], labels the
  # real tokens.
  weights = ours["masked_lm_weights"] > 0
  positions = ours["masked_lm_positions"]
  rows = np.arange(len(positions))[:, None]
  assert all(np.all(np.diff(p[w]) > 0) for p, w in zip(positions, weights))
  assert (positions[~weights] == 0).all()
  assert (ours["masked_lm_ids"][~weights] == 0).all()
  real_ids = tiled_ids[rows, positions]
  np.testing.assert_array_equal(ours["masked_lm_ids"][weights],
                                real_ids[weights])
  assert not np.isin(real_ids[weights], [CLS, SEP]).any()
  # Only the chosen positions change.
  changed = ours["input_ids"] != tiled_ids
  chosen = np.zeros_like(changed)
  chosen[np.nonzero(weights)[0], positions[weights]] = True
  assert not (changed & ~chosen).any()

  # 80% [MASK], 10% kept, 10% random: ours within a z-bound of the rates
  # and of the original's counts. (A random id is the token itself, or
  # [MASK], 1 time in vocab_size: far inside the bounds.)
  def shares(input_ids, masked_positions, labels, w):
    now = np.take_along_axis(input_ids, masked_positions, 1)[w]
    is_mask = now == MASK
    kept = (now == labels[w]) & ~is_mask
    return np.array([is_mask.mean(), kept.mean(), 1 - is_mask.mean() -
                     kept.mean()]), w.sum()

  got, num = shares(ours["input_ids"], positions, ours["masked_lm_ids"],
                    weights)
  theirs, num_theirs = shares(oracle["input_ids"],
                              oracle["masked_lm_positions"],
                              oracle["masked_lm_ids"],
                              oracle["masked_lm_weights"] > 0)
  for p, share, share_theirs in zip([0.8, 0.1, 0.1], got, theirs):
    assert abs(share - p) <= binomial_bound(p, num), (got, p)
    assert abs(share - share_theirs) <= Z * np.sqrt(
        p * (1 - p) * (1 / num + 1 / num_theirs)), (got, theirs)
  print(mode, "ours", got, num, "original", theirs, num_theirs)
  assert num > 50000 and num_theirs > 500

  # Whole words are never split with wwm, and are split without it.
  is_piece = candidates == instances.CONTINUATION
  split = 0
  for row in range(len(positions)):
    record = row % n
    picked = set(positions[row][weights[row]])
    for unit in units_of(ids[record], is_piece[record],
                         oracle["input_mask"][record]):
      inside = [i in picked for i in unit]
      split += any(inside) and not all(inside)
  if wwm:
    assert split == 0
  else:
    assert split > 100

  if not wwm:
    # Each candidate is chosen budget / candidates of the time (a uniform
    # shuffle), within a z-bound per position.
    for record in range(0, n, 7):
      hits = chosen.reshape(PASSES, n, -1)[:, record].mean(0)
      cands = candidates[record] > 0
      p = budget[record] / cands.sum()
      assert (np.abs(hits[cands] - p) <= binomial_bound(p, PASSES)).all()
      assert (hits[~cands] == 0).all()


def tiny_example():
  # [CLS] w ##p w [SEP] ##p w [SEP] pad pad: units {1,2} {3,5} {6} in wwm.
  return {"input_ids": tf.constant([CLS, 7, 8, 9, SEP, 10, 11, SEP, 0, 0]),
          "input_mask": tf.constant([1] * 8 + [0, 0]),
          "masked_lm_candidates": tf.constant([0, 1, 2, 1, 0, 2, 1, 0, 0, 0])}


def test_whole_word_units_cross_a_sep_as_the_originals():
  seen = set()
  for number in range(200):
    out = masking.mask_example(tiny_example(), tf.constant([3, number]), 0.5,
                               4, True, MASK, 30)
    positions = out["masked_lm_positions"].numpy()
    picked = frozenset(positions[out["masked_lm_weights"].numpy() > 0])
    seen.add(picked)
  # Budget round(8 x 0.5) = 4; a unit that would overshoot is skipped.
  assert seen == {frozenset({1, 2, 3, 5}), frozenset({1, 2, 6}),
                  frozenset({3, 5, 6})}


def test_same_key_same_masks_other_key_other_masks():
  masker = masking.example_masker(5, 0.3, 4, False, MASK, 30)
  first = [masker(tiny_example(), tf.constant(i, tf.int64)) for i in range(8)]
  again = [masker(tiny_example(), tf.constant(i, tf.int64)) for i in range(8)]
  for a, b in zip(first, again):
    for key in a:
      np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())
  picks = {tuple(f["masked_lm_positions"].numpy()) for f in first}
  assert len(picks) > 3


def write_unmasked(path, num_records, length=16):
  """Unmasked records of distinct tokens, their first token its number."""
  rng = random.Random(0)
  encoder = instances.InstanceEncoder(1000, length, 4)
  vocab = instances.MaskingVocab({"[PAD]": 0, "[CLS]": 1, "[SEP]": 2,
                                  "[MASK]": 3,
                                  **{"w%d" % i: i for i in range(4, 1000)}})
  records = []
  for i in range(num_records):
    tokens = [1, 100 + i] + [rng.randint(4, 999) for _ in range(8)] + [2]
    records.append(encoder.encode(instances.TrainingInstance(
        tokens, [0] * len(tokens), None, None, False), vocab))
  with tfrecord_writer.RoundRobinWriter([str(path)], False) as writer:
    for record in records:
      writer.write(record)
  return str(path)


def test_pipeline_masks_change_across_epochs_and_resume_the_same(tmp_path):
  files = [write_unmasked(tmp_path / "u.tfrecord", 10)]
  schema = pretraining_data.unmasked_features(16)
  masker = masking.example_masker(1, 0.3, 4, False, MASK, 1000)
  dataset_fn = input_pipeline.training_dataset_fn(
      files, schema, 2, seed=4, num_records=10, per_example=masker)
  batches = list(dataset_fn(None, 0).take(20).as_numpy_iterator())
  # 20 batches of 2: four epochs of 10 records; each record's masks
  # differ between epochs.
  by_record = {}
  for batch in batches:
    for ids, positions, labels, weights in zip(
        batch["input_ids"], batch["masked_lm_positions"],
        batch["masked_lm_ids"], batch["masked_lm_weights"]):
      real = ids.copy()
      real[positions[weights > 0]] = labels[weights > 0]
      by_record.setdefault(int(real[1]), []).append(tuple(positions))
  assert sorted(by_record) == list(range(100, 110))
  assert all(len(v) == 4 and len(set(v)) > 1 for v in by_record.values())
  # Resumed at step 7: the uninterrupted run's batches from there.
  resumed = list(dataset_fn(None, 7).take(13).as_numpy_iterator())
  for want, got in zip(batches[7:], resumed):
    for key in want:
      np.testing.assert_array_equal(got[key], want[key])
  # Eval: in file order, the same masks on every read, not those of
  # training with --seed=EVAL_SEED.
  eval_fn = input_pipeline.eval_dataset_fn(
      files, schema, 5, per_example=masking.eval_masker(0.3, 4, False, MASK,
                                                        1000))
  first = list(eval_fn(None).take(2).as_numpy_iterator())
  again = list(eval_fn(None).take(2).as_numpy_iterator())
  for a, b in zip(first, again):
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])
  as_training = input_pipeline.eval_dataset_fn(
      files, schema, 5, per_example=masking.example_masker(
          masking.EVAL_SEED, 0.3, 4, False, MASK, 1000))
  other = list(as_training(None).take(2).as_numpy_iterator())
  assert any((a["masked_lm_positions"] != b["masked_lm_positions"]).any()
             for a, b in zip(first, other))


@pytest.mark.parametrize("order,budget,want", [
    ([0, 1, 2], 4, [True, False, True]),  # 1 skipped, 2 still fits
    ([1, 0, 2], 4, [False, True, True]),  # 0 overshoots after 1
    ([2, 0, 1], 3, [True, False, True]),  # budget met: stop
    ([0, 2, 1], 9, [True, True, True]),  # all, short of the budget
])
def test_greedy_skips_a_word_that_overshoots(order, budget, want):
  taken = masking._choose_units(tf.constant([2, 3, 1]), tf.constant(order),
                                tf.constant(budget))
  np.testing.assert_array_equal(taken.numpy(), want)
