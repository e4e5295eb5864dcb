"""extract_features' output: the original's JSON lines."""

import collections
import json


def to_json_line(feature, layer_indexes, layer_outputs):
  """Formats one example as the original's JSON line.

  Args:
    feature: InputFeatures.
    layer_indexes: list of int, as given in --layers.
    layer_outputs: list (per layer index) of float32 [T, H] arrays.

  Returns:
    str, one JSON object and a newline.
  """
  all_features = []
  for i, token in enumerate(feature.tokens):
    all_layers = [
        collections.OrderedDict([
            ("index", layer_index),
            # float(x) of a float32 then round(): exactly the original.
            ("values", [round(x, 6) for x in output[i].tolist()]),
        ]) for layer_index, output in zip(layer_indexes, layer_outputs)
    ]
    all_features.append(
        collections.OrderedDict([("token", token), ("layers", all_layers)]))
  output = collections.OrderedDict([("linex_index", feature.unique_id),
                                    ("features", all_features)])
  return json.dumps(output) + "\n"
