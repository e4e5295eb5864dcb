"""--precision=bfloat16's warning on CPUs without bfloat16 units, from
/proc/cpuinfo files as Linux writes them."""

from absl import logging
import tensorflow as tf

from runner_lib.core import precision

# The first lines of a real /proc/cpuinfo processor block (a Sapphire Rapids
# Xeon), flags cut to a few; and the same without the bfloat16 flags.
_XEON = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme sse sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile
bugs\t\t: spectre_v1
"""
_OLD = _XEON.replace(" avx512_bf16 amx_bf16 amx_tile", "")
_ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm bf16\n"


def _write(tmp_path, text):
  path = tmp_path / "cpuinfo"
  path.write_text(text)
  return str(path)


def test_cpu_flags_read_the_flags_line(tmp_path):
  assert precision.cpu_flags(_write(tmp_path, _XEON)) == {
      "fpu", "vme", "sse", "sse2", "avx2", "avx512f", "avx512_bf16",
      "amx_bf16", "amx_tile"}
  assert "bf16" in precision.cpu_flags(_write(tmp_path, _ARM))
  assert precision.cpu_flags(str(tmp_path / "absent")) is None


def test_warns_only_without_bf16_units(tmp_path, monkeypatch):
  warnings = []
  monkeypatch.setattr(logging, "warning",
                      lambda msg, *args: warnings.append(msg % args))
  assert not tf.config.list_physical_devices("GPU")
  assert not precision.warn_without_bf16_units(_write(tmp_path, _XEON))
  assert not precision.warn_without_bf16_units(_write(tmp_path, _ARM))
  assert warnings == []
  assert precision.warn_without_bf16_units(_write(tmp_path, _OLD))
  assert len(warnings) == 1
  assert "avx512_bf16 nor amx_bf16" in warnings[0]
  assert "slower than --precision=float32" in warnings[0]
  # Unreadable flags (not Linux): nothing is claimed.
  assert not precision.warn_without_bf16_units(str(tmp_path / "absent"))
  assert len(warnings) == 1
