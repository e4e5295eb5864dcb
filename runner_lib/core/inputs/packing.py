"""The [CLS] A [SEP] B [SEP] input layout, truncation and padding: every
task's features are packed here."""


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Truncates a pair in place to at most max_length tokens in total.

  As the original: one token at a time from the end of the longer sequence
  (from B when they are equally long), which keeps more of a short sequence
  than cutting a fixed share from each would.

  Args:
    tokens_a: list, shortened in place.
    tokens_b: list, shortened in place.
    max_length: int >= 0.
  """
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def pair_layout(tokens_a, tokens_b, max_seq_length, cls="[CLS]", sep="[SEP]"):
  """Lays out one or two token lists as BERT input, truncated.

  Segment ids are 0 for [CLS] A [SEP] and 1 for B [SEP]; the model learned
  them as sentence A / B embeddings in pre-training.

  Args:
    tokens_a: list of str WordPieces (not modified), or of int ids.
    tokens_b: list like tokens_a, or None/empty for a single sentence.
    max_seq_length: int >= 3, the total length including special tokens.
    cls: the [CLS] item (its id, when laying out ids).
    sep: the [SEP] item (its id, when laying out ids).

  Returns:
    (tokens, segment_ids): lists of equal length <= max_seq_length, unpadded.
  """
  tokens_a = list(tokens_a)
  tokens_b = list(tokens_b or [])
  if tokens_b:
    # Room for [CLS], [SEP], [SEP].
    truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
  else:
    # Room for [CLS], [SEP].
    tokens_a = tokens_a[:max_seq_length - 2]
  tokens = [cls] + tokens_a + [sep]
  segment_ids = [0] * len(tokens)
  if tokens_b:
    tokens += tokens_b + [sep]
    segment_ids += [1] * (len(tokens_b) + 1)
  return tokens, segment_ids


def pad_features(input_ids, segment_ids, max_seq_length):
  """Pads ids with 0 to max_seq_length and builds the input mask.

  Args:
    input_ids: list of int, at most max_seq_length long.
    segment_ids: list of int, same length.
    max_seq_length: int.

  Returns:
    (input_ids, input_mask, segment_ids): lists of length max_seq_length;
    input_mask is 1 for real tokens, 0 for padding.
  """
  padding = max_seq_length - len(input_ids)
  return (list(input_ids) + [0] * padding,
          [1] * len(input_ids) + [0] * padding,
          list(segment_ids) + [0] * padding)


def encode_pair(tokenizer, text_a, text_b, max_seq_length):
  """Tokenizes, lays out, truncates and pads one text or text pair.

  Args:
    tokenizer: tokenization.FullTokenizer.
    text_a: str.
    text_b: str or None / empty.
    max_seq_length: int >= 3.

  Returns:
    (tokens unpadded, input_ids, input_mask, segment_ids), the last three
    lists of length max_seq_length.
  """
  tokens_a = tokenizer.tokenize(text_a)
  tokens_b = tokenizer.tokenize(text_b) if text_b else None
  tokens, segment_ids = pair_layout(tokens_a, tokens_b, max_seq_length)
  input_ids, input_mask, segment_ids = pad_features(
      tokenizer.convert_tokens_to_ids(tokens), segment_ids, max_seq_length)
  return tokens, input_ids, input_mask, segment_ids
