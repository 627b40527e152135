# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# torch's CPU wheel is installed first so that no CUDA build is ever pulled onto a CPU machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
TORCH  ?= torch==2.13.0
EXTRAS ?= dev,ray,web,lm,lora,tensorboard,bench,conform,reasoning-gym
# The peers whose own loss code tests/audit/test_presets_peers.py runs. verl and OpenRLHF pin GPU stacks
# (flash-attn, DeepSpeed, vLLM, transformers < 5.11 or == 5.15) that pip cannot install beside pglab[lm], so their
# wheels and the pure-Python modules their algorithm files import go in without dependencies, into a folder that
# only the tests put on sys.path.
PEERS  := verl==0.9.1 openrlhf==0.11.2 tensordict==0.10.0 pyvers==0.1.0 codetiming==1.4.0 orjson==3.13.0 \
          omegaconf==2.4.0

.PHONY: demo test test-fast lint bench docs-numbers clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

$(VENV)/.peers: $(VENV)/.installed Makefile
	rm -rf $(VENV)/peers
	$(PY) -m pip install -q --no-deps --target $(VENV)/peers $(PEERS)
	rm -rf $(VENV)/peers/scripts $(VENV)/peers/tests   # the wheels' top-level test and script packages
	touch $@

# Debian packages some tests use (bubblewrap, chromium); without them those tests skip with the reason.
$(VENV)/.system: tests/setup_system.sh
	sh tests/setup_system.sh
	@mkdir -p $(VENV) && touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/pglab demo

# Every tier: unit, integration (other processes: subprocesses, the sandbox, torch.distributed, a browser)
# and experiment (experiments and training runs at reduced size). CI runs this (.ci/run).
# Three workers on two cores: a worker spends about a third of its time waiting on subprocesses, sandboxes and
# process groups (measured on the tree of 26aad8b, warm caches, idle: 318 s of pytest with three, 374 s with two; with two
# CPU hogs beside it every test still passed, 535 s).
test: $(VENV)/.installed $(VENV)/.system $(VENV)/.peers
	$(PY) -m pytest -q -n 3 --dist loadfile

# The unit tier only (in-process tests, about a minute on 2 cores): the loop while editing.
test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m unit -n 2 --dist loadfile

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests scripts

bench: $(VENV)/.installed
	$(VENV)/bin/pglab bench --all

# Full-size runs of the experiments the docs quote (about 10 minutes on 2 idle cores, an hour on a loaded one),
# then docs/numbers.json and every marked number in README.md and docs/*.md rewritten from them;
# tests/test_docs_numbers.py checks the result.
docs-numbers: $(VENV)/.installed
	rm -rf runs/docs-numbers
	$(PY) scripts/docs_numbers.py --runs runs/docs-numbers --run

clean:
	rm -rf $(VENV) runs .pytest_cache test-artifacts
