"""HuggingFace's own reader of Google checkpoints on checkpoints of ours.

Run in .venv-hf with TensorFlow installed beside PyTorch and transformers
(`make .venv-hf-tf`), never in the project's venv: transformers'
load_tf_weights_in_bert (the function behind its
convert_bert_original_tf_checkpoint_to_pytorch script) loads each
checkpoint into a BertForPreTraining built from the checkpoint's
bert_config.json, exactly as a user converting one of Google's checkpoints
does. Then every PyTorch weight that reader filled is compared with the
checkpoint's tensor under the original's name (kernels transposed), and
every weight it left alone must still hold its fresh initial value: a
training-only tensor written into a weight whose shape happens to agree
would show as a mismatch. Prints one JSON line per checkpoint; exits 1
if any failed.

  .venv-hf/bin/python benchmarks/peers/hf_load_checkpoint.py
      --bert_config_file=CONFIG.json PREFIX [PREFIX ...]
"""

import argparse
import json
import sys

import numpy as np
import tensorflow as tf
import torch
import transformers
from transformers.models.bert import modeling_bert


def original_name(hf_name):
  """The original's variable name a BertForPreTraining weight comes from,
  and whether it is a transposed kernel; None for weights the original
  has no variable for."""
  names = []
  for part in hf_name.split("."):
    if part.isdigit():
      names[-1] = "%s_%s" % (names[-1], part)
    else:
      names.append(part)
  leaf = names[-1]
  if "LayerNorm" in names:
    names[-1] = {"weight": "gamma", "bias": "beta"}[leaf]
    return "/".join(names), False
  if names[-2].endswith("_embeddings"):
    return "/".join(names[:-1]), False
  if names[:3] == ["cls", "predictions", "decoder"]:
    return None, False  # Tied to the word embeddings.
  if names[:3] == ["cls", "predictions", "bias"]:
    return "cls/predictions/output_bias", False
  if names[:2] == ["cls", "seq_relationship"]:
    return ("cls/seq_relationship/" +
            {"weight": "output_weights", "bias": "output_bias"}[leaf]), False
  names[-1] = {"weight": "kernel", "bias": "bias"}[leaf]
  return "/".join(names), leaf == "weight"


def check(prefix, config):
  torch.manual_seed(0)
  model = transformers.BertForPreTraining(config)
  fresh = {n: p.detach().clone() for n, p in model.state_dict().items()}
  result = {"checkpoint": prefix}
  try:
    modeling_bert.load_tf_weights_in_bert(model, config, prefix)
  except Exception as e:  # pylint: disable=broad-except
    result.update(ok=False, error="%s: %s" % (type(e).__name__, e))
    return result
  reader = tf.train.load_checkpoint(prefix)
  stored = reader.get_variable_to_shape_map()
  loaded, untouched, wrong = [], [], []
  for hf_name, value in model.state_dict().items():
    name, transposed = original_name(hf_name)
    if name is None:
      continue  # The decoder, tied to the embeddings and the output bias.
    if name not in stored:
      (untouched if torch.equal(value, fresh[hf_name]) else wrong).append(
          hf_name)
      continue
    want = reader.get_tensor(name)
    if transposed:
      want = want.T
    if np.array_equal(value.numpy(), want):
      loaded.append(hf_name)
    else:
      wrong.append(hf_name)
  result.update(ok=not wrong and bool(loaded), loaded=len(loaded),
                untouched=untouched, wrong=wrong,
                transformers=transformers.__version__)
  return result


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--bert_config_file", required=True)
  parser.add_argument("prefixes", nargs="+")
  args = parser.parse_args()
  config = transformers.BertConfig.from_json_file(args.bert_config_file)
  failed = False
  for prefix in args.prefixes:
    result = check(prefix, config)
    failed |= not result["ok"]
    print(json.dumps(result), flush=True)
  sys.exit(1 if failed else 0)


if __name__ == "__main__":
  main()
