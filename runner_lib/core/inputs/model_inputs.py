"""Loading and cross-checking a model's config, vocab and sequence length."""

import modeling
from runner_lib.core import errors
import tokenization


def load_config_and_tokenizer(bert_config_file, vocab_file, do_lower_case,
                              init_checkpoint, max_seq_length):
  """Reads the config and vocab and checks they fit each other and the run.

  Args:
    bert_config_file: str.
    vocab_file: str.
    do_lower_case: bool.
    init_checkpoint: str or None; its directory name is checked against
      do_lower_case for Google's released models, and it must exist.
    max_seq_length: int.

  Returns:
    (modeling.BertConfig, tokenization.FullTokenizer).

  Raises:
    errors.InputError, modeling.ConfigError, modeling.CheckpointError.
  """
  config = modeling.BertConfig.from_json_file(bert_config_file)
  if max_seq_length > config.max_position_embeddings:
    raise errors.InputError(
        "--max_seq_length=%d exceeds max_position_embeddings=%d of %s; the "
        "model has no position embeddings past that." %
        (max_seq_length, config.max_position_embeddings, bert_config_file))
  if max_seq_length < 3:
    raise errors.InputError(
        "--max_seq_length=%d is too small: [CLS] A [SEP] B [SEP] needs at "
        "least 3 positions." % max_seq_length)
  if init_checkpoint:
    # A directory stands for the prefix inside it, whose name (e.g.
    # uncased_L-12_H-768_A-12/bert_model.ckpt) the case check reads.
    init_checkpoint = modeling.resolve_checkpoint_path(init_checkpoint)
  try:
    tokenization.validate_case_matches_checkpoint(do_lower_case,
                                                  init_checkpoint)
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case)
  except ValueError as e:
    raise errors.InputError(str(e)) from None
  if tokenizer.vocab_size > config.vocab_size:
    raise errors.InputError(
        "vocab_file %s has %d entries but vocab_size in %s is %d: ids past "
        "the embedding table. Use the vocab and config of the same model." %
        (vocab_file, tokenizer.vocab_size, bert_config_file,
         config.vocab_size))
  return config, tokenizer
