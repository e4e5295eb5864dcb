"""A sharded create_pretraining_data run: plan, resume, watch, manifest.

The client writes OUTPUT.manifest.json before any shard (the settings, the
inputs and their sizes, the number of shards; "complete": false) and again
at the end (each shard's file and record count; "complete": true). Its name
is outside the OUTPUT-* glob that run_pretraining.py reads.

A rerun into the same --output_file with the same settings skips the
shards already written (a run stopped by Ctrl-C or a lost client resumes;
a complete one does nothing). Other settings, or shard files without a
manifest, are refused: two runs are never mixed.
"""

import hashlib
import json
import os

from absl import logging

from runner_lib.core import errors
from runner_lib.core import gfile
from runner_lib.core.cli import progress as core_progress
from runner_lib.core.files import fileio
from runner_lib.core.inputs import tfrecord_writer
from runner_lib.pretraining import sharding

MANIFEST_SUFFIX = ".manifest.json"


def manifest_path(output_file):
  return output_file + MANIFEST_SUFFIX


def run_spec(flag_values, input_files, input_sizes, vocab_file, shard_bytes,
             num_shards):
  """What a run's output depends on, as JSON-ready data.

  Args:
    flag_values: dict flag name -> value, the flags that change records.
    input_files: list of str. input_sizes: list of int.
    vocab_file: str.
    shard_bytes: int. num_shards: int.
  """
  with gfile.open(vocab_file, "rb") as f:
    vocab_sha256 = hashlib.sha256(f.read()).hexdigest()
  return {"flags": dict(flag_values, shard_bytes=shard_bytes),
          "inputs": [[path, size] for path, size in zip(input_files,
                                                        input_sizes)],
          "vocab_sha256": vocab_sha256, "num_shards": num_shards}


def _read_manifest(path):
  try:
    with gfile.open(path, "r") as f:
      return json.load(f)
  except (ValueError, UnicodeDecodeError) as e:
    raise errors.OutputError(
        "%s is not a manifest of this script (%s): delete it or choose "
        "another --output_file." % (path, e)) from None


def _write_manifest(path, manifest):
  with fileio.atomic_output(path) as f:
    json.dump(manifest, f, indent=1, sort_keys=True)
    f.write("\n")


def _difference(old, new):
  """A short description of the first setting that differs."""
  for key in ("flags", "inputs", "vocab_sha256", "num_shards"):
    if old.get(key) == new[key]:
      continue
    if key == "flags":
      for name in sorted(set(old.get(key, {})) | set(new[key])):
        if old[key].get(name) != new[key].get(name):
          return "--%s: %s there, %s here" % (name, old[key].get(name),
                                              new[key][name])
    return "%s differ" % key.replace("_", " ")
  return None


def prepare(output_file, spec):
  """Checks what output_file holds; returns the indices already written.

  Raises:
    errors.OutputError: a run with other settings is there, or shard files
      without a manifest.
  """
  path = manifest_path(output_file)
  existing = sharding.existing_shards(output_file)
  if not gfile.exists(path):
    if existing:
      raise errors.OutputError(
          "%s holds shard files (%s, ...) but no manifest: another run's? "
          "Delete them or choose another --output_file." %
          (output_file, os.path.basename(existing[0])))
    return set()
  old = _read_manifest(path)
  difference = _difference(old, spec)
  if difference:
    raise errors.OutputError(
        "%s is a run with other settings (%s): choose another "
        "--output_file, or delete that run to replace it." % (path,
                                                              difference))
  names = {sharding.shard_path(output_file, i, spec["num_shards"]): i
           for i in range(spec["num_shards"])}
  return {names[p] for p in existing if p in names}


def write(output_file, spec, shards, make, where):
  """Makes the shards not yet written, then the manifest.

  Args:
    output_file: str, the prefix.
    spec: run_spec's dict.
    shards: list of sharding.Shard, all of the run's.
    make: function (list of Shard) -> iterable of ShardResult, making them.
    where: str, for the progress line ("2 local workers").

  Returns:
    dict, the manifest written.

  Raises:
    errors.InputError, errors.OutputError, KeyboardInterrupt: the run
      stopped; complete shards stay (a rerun resumes) but nothing partial.
  """
  done = prepare(output_file, spec)
  path = manifest_path(output_file)
  created = not gfile.exists(path)
  if created:
    _write_manifest(path, dict(spec, complete=False))
  todo = [s for s in shards if s.index not in done]
  if done:
    logging.info("%d of %d shards are already written: making the other "
                 "%d.", len(done), len(shards), len(todo))
  total_mb = sum(s.end - s.start for s in todo) / 1e6
  progress = core_progress.Progress("Making instances on %s" % where,
                                    total_mb)
  done_bytes = documents = records = 0
  skipped, counts = {}, {}
  written = []
  try:
    for result in make(todo) if todo else ():
      written.append(sharding.shard_path(output_file, result.index,
                                         len(shards)))
      shard = shards[result.index]
      done_bytes += shard.end - shard.start
      documents += result.documents
      records += result.records
      counts[result.index] = result.records
      if result.skipped_lines:
        skipped[result.path] = (skipped.get(result.path, 0) +
                                result.skipped_lines)
      progress.update(done_bytes / 1e6, documents=documents,
                      instances=records)
  except errors.InputError:
    # Bad input: the run is void (as the single-process run leaves no
    # file), shards made before it included.
    names = {sharding.shard_path(output_file, s.index, len(shards))
             for s in todo}
    sharding.remove_quietly(
        [p for p in sharding.existing_shards(output_file) if p in names] +
        ([path] if created else []))
    raise
  except BaseException:
    # Stopped (Ctrl-C, a lost cluster): the complete shards stay, for a
    # rerun to skip.
    if created and not sharding.existing_shards(output_file):
      sharding.remove_quietly([path])
    raise
  finally:
    sharding.remove_quietly(sharding.temporary_files(output_file,
                                                     len(shards)))
  for input_path, count in sorted(skipped.items()):
    logging.warning("%s: skipped %d lines that are not UTF-8.", input_path,
                    count)
  files = []
  for shard in shards:
    name = sharding.shard_path(output_file, shard.index, len(shards))
    if shard.index not in counts:  # written by an earlier run
      counts[shard.index] = tfrecord_writer.count_records(
          name, spec["flags"]["gzip"])
    files.append({"file": os.path.basename(name),
                  "records": counts[shard.index]})
  manifest = dict(spec, complete=True, shards=files,
                  records=sum(f["records"] for f in files))
  _write_manifest(path, manifest)
  return manifest
