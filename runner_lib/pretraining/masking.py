"""Dynamic masking: the original's masked LM rules as tf.data ops.

create_pretraining_data.py --dynamic_masking writes unmasked records (real
tokens, and masked_lm_candidates saying which positions may be masked and
which "##" pieces continue a word); run_pretraining.py --dynamic_masking
masks each example as it reads it, with the rules of the original's
create_masked_lm_predictions (instances.py): the same choice of how many
and of which positions, the same 80/10/10. Only the random numbers are
other: stateless draws keyed by (seed, example number), so a seed gives the
same masks on every run and on resume, and each pass over the records new
ones (RoBERTa's dynamic masking).

Pure TensorFlow (no py_function): it runs wherever tf.data runs.

Shapes: T = max_seq_length, P = max_predictions_per_seq.
"""

import tensorflow as tf

from runner_lib.pretraining import instances

# Eval draws its masks with this seed, whatever --seed: the same eval
# examples for every run, so runs with other training seeds compare.
EVAL_SEED = 12345

# The masks' feature, as create_pretraining_data.py --dynamic_masking
# writes it.
CANDIDATES = "masked_lm_candidates"


def num_to_predict(length, masked_lm_prob, max_predictions_per_seq):
  """The original's min(P, max(1, int(round(length * masked_lm_prob)))).

  Python's round() rounds halves to even, as tf.round does; the product is
  taken in float64, as Python's, so that the same halves arise.

  Args:
    length: int32 scalar, the tokens with [CLS] and [SEP].
    masked_lm_prob: float.
    max_predictions_per_seq: int.

  Returns:
    int32 scalar.
  """
  wanted = tf.cast(tf.round(tf.cast(length, tf.float64) *
                            tf.constant(masked_lm_prob, tf.float64)),
                   tf.int32)
  return tf.minimum(max_predictions_per_seq, tf.maximum(1, wanted))


def _units(candidates, do_whole_word_mask):
  """The unit each position is masked with, as the original groups them.

  Args:
    candidates: int32 [T], masked_lm_candidates.
    do_whole_word_mask: bool.

  Returns:
    (unit int32 [T]: the unit of each candidate, T for the others;
     units: int32 scalar, how many).
  """
  is_candidate = candidates != instances.NEVER_MASKED
  starts = is_candidate
  if do_whole_word_mask:
    # A "##" piece joins the candidate before it, wherever that is (across
    # a [SEP] too, as the original); only a first candidate starts a unit.
    first = tf.cumsum(tf.cast(is_candidate, tf.int32)) == 1
    starts = is_candidate & ((candidates == instances.WORD_START) | first)
  unit = tf.cumsum(tf.cast(starts, tf.int32)) - 1
  num_units = tf.reduce_sum(tf.cast(starts, tf.int32))
  return tf.where(is_candidate, unit, tf.size(candidates)), num_units


def _choose_units(sizes, order, budget):
  """The original's greedy pass over shuffled units.

  Takes each unit in order unless it would overshoot the budget (a whole
  word is skipped, never cut), and stops once the budget is met. The
  units before the first that overshoots are all taken, found at once;
  only the rest is a loop (usually a few steps: a one-piece word fills
  what is left).

  Args:
    sizes: int32 [U], positions per unit.
    order: int32 [U], the shuffled unit order.
    budget: int32 scalar, num_to_predict.

  Returns:
    bool [U], the units taken.
  """
  num_units = tf.size(order)
  ordered_sizes = tf.gather(sizes, order)
  fits = tf.cumsum(ordered_sizes) <= budget
  prefix = tf.reduce_sum(tf.cast(fits, tf.int32))
  taken_in_order = fits

  def more(i, taken_count, taken_in_order):
    del taken_in_order
    return (i < num_units) & (taken_count < budget)

  def step(i, taken_count, taken_in_order):
    take = taken_count + ordered_sizes[i] <= budget
    taken_in_order = tf.tensor_scatter_nd_update(taken_in_order, [[i]],
                                                 [take])
    return i + 1, taken_count + tf.where(take, ordered_sizes[i], 0), (
        taken_in_order)

  _, _, taken_in_order = tf.while_loop(
      more, step, (prefix, tf.reduce_sum(ordered_sizes[:prefix]),
                   taken_in_order))
  return tf.scatter_nd(order[:, None], taken_in_order, [num_units])


def mask_example(features, seed, masked_lm_prob, max_predictions_per_seq,
                 do_whole_word_mask, mask_id, vocab_size):
  """Masks one unmasked example as create_masked_lm_predictions would.

  Candidates are the positions but [CLS], [SEP] and padding (with whole-
  word masking a "##" piece joins the candidate before it); they are
  shuffled and taken greedily up to num_to_predict; each chosen position
  becomes [MASK] 80% of the time, stays itself 10%, and 10% a random id
  uniform over [0, vocab_size).

  Args:
    features: dict of one parsed unmasked record: input_ids, input_mask,
      masked_lm_candidates (int32 [T]), and any others (passed through).
    seed: int32/int64 [2], the stateless key of this example's draws.
    masked_lm_prob: float.
    max_predictions_per_seq: int, P.
    do_whole_word_mask: bool.
    mask_id: int, the id of [MASK].
    vocab_size: int, random ids are drawn below it (the original draws
      over the vocab file's tokens).

  Returns:
    dict: the features, input_ids masked, masked_lm_candidates dropped,
    and the original records' masked_lm_positions, masked_lm_ids (int32
    [P]) and masked_lm_weights (float32 [P]), padded with 0.
  """
  features = dict(features)
  candidates = features.pop(CANDIDATES)
  input_ids = features["input_ids"]
  length = tf.size(input_ids)
  shuffle_seed, corrupt_seed, word_seed = tf.unstack(
      tf.random.experimental.stateless_split(seed, 3))

  unit, num_units = _units(candidates, do_whole_word_mask)
  sizes = tf.math.unsorted_segment_sum(tf.ones_like(unit), unit, length + 1)
  # A uniform shuffle: units sorted by random keys (the original's
  # rng.shuffle draws another, equally uniform, permutation).
  keys = tf.random.stateless_uniform([num_units], shuffle_seed)
  order = tf.argsort(keys, stable=True)
  budget = num_to_predict(tf.reduce_sum(features["input_mask"]),
                          masked_lm_prob, max_predictions_per_seq)
  taken = _choose_units(sizes[:num_units], order, budget)
  # Non-candidates' unit (length) is never taken.
  chosen = tf.gather(tf.concat([taken, tf.zeros([length + 1 - num_units],
                                                tf.bool)], 0), unit)

  # 80% [MASK], 10% kept, 10% random: the original's draws r < 0.8, then
  # r' < 0.5, per chosen position.
  draws = tf.random.stateless_uniform([2, length], corrupt_seed)
  random_ids = tf.random.stateless_uniform(
      [length], word_seed, minval=0, maxval=vocab_size, dtype=tf.int32)
  new_ids = tf.where(draws[0] < 0.8, mask_id,
                     tf.where(draws[1] < 0.5, input_ids, random_ids))
  features["input_ids"] = tf.where(chosen, new_ids, input_ids)

  # Sorted positions, as the original writes them, padded to P.
  positions = tf.cast(tf.where(chosen)[:, 0], tf.int32)
  count = tf.size(positions)
  padding = [[0, max_predictions_per_seq - count]]
  features["masked_lm_positions"] = tf.ensure_shape(
      tf.pad(positions, padding), [max_predictions_per_seq])
  features["masked_lm_ids"] = tf.ensure_shape(
      tf.pad(tf.gather(input_ids, positions), padding),
      [max_predictions_per_seq])
  features["masked_lm_weights"] = tf.ensure_shape(
      tf.pad(tf.ones([count], tf.float32), padding),
      [max_predictions_per_seq])
  return features


def example_masker(seed, masked_lm_prob, max_predictions_per_seq,
                   do_whole_word_mask, mask_id, vocab_size):
  """A function (features, example number) -> masked features, for
  input_pipeline's per_example: example number n's draws are keyed by
  (seed, n), so they are the same on every run and on resume, and other
  for each n (each pass over the records).

  Args:
    seed: int, --seed.
    masked_lm_prob, max_predictions_per_seq, do_whole_word_mask, mask_id,
      vocab_size: as mask_example's.

  Returns:
    function (dict of one record's tensors, int64 scalar) -> dict.
  """

  def mask(features, number):
    key = tf.stack([tf.constant(seed, tf.int64), number])
    return mask_example(features, key, masked_lm_prob,
                        max_predictions_per_seq, do_whole_word_mask,
                        mask_id, vocab_size)

  return mask


def eval_masker(masked_lm_prob, max_predictions_per_seq, do_whole_word_mask,
                mask_id, vocab_size):
  """example_masker's function for eval: keyed by (EVAL_SEED, -1 - n),
  the same masks on every eval whatever --seed, and never a training
  example's key (those count from 0) even where --seed is EVAL_SEED and
  eval reads the training records.

  Args:
    as example_masker's, without seed.

  Returns:
    function (dict of one record's tensors, int64 scalar) -> dict.
  """
  training = example_masker(EVAL_SEED, masked_lm_prob,
                            max_predictions_per_seq, do_whole_word_mask,
                            mask_id, vocab_size)
  return lambda features, number: training(features, -1 - number)
