# astral-testbed: `make run` launches the fabric, `make test` runs every test.
# Both set the machine up first (idempotent), so a fresh Debian 12 needs nothing else.

VENV     := .venv
PY       := $(VENV)/bin/python
STAMP    := $(VENV)/.installed
# Debian packages: Mininet needs its own `mnexec` (pip's mininet lacks it), ping for
# reachability checks, cpp for the P4 preprocessor (as p4c uses it), tcpdump to read pcaps,
# tshark to decode them as Wireshark does, chromium to render the demo's report in tests,
# gcc and libc6-dev to compile the native switch engine at start (loaded through cffi),
# sudo and openssh-server for Mininet's cluster mode (its test runs an sshd per pretend server
# in namespaces; on a systemd machine the package also enables Debian's ssh service); gcc and
# libc6-dev also build the native NIC (tccl/nic); python3-pip is the pip that fills the venv.
APT_PKGS := mininet iputils-ping iproute2 ethtool tcpdump tshark chromium cpp python3-venv python3-dev python3-pip openssh-server sudo gcc libc6-dev
# What the venv and its pip need before pip runs (the rest installs beside it).
VENV_PKGS := python3-venv python3-pip
FABRIC   ?= topo/fabrics/default.yaml
# RATE=<Mbit/s>: run and demo FABRIC with its NICs' links at that rate, the profile
# restated (python -m topo.atrate writes the spec into build/fabrics; docs/fabric.md).
RATE_FABRIC = build/fabrics/$(basename $(notdir $(FABRIC)))-$(RATE)mbps.yaml
RUN_FABRIC = $(if $(RATE),$(RATE_FABRIC),$(FABRIC))
BACKEND  ?= p4sim
# The agents' RoCE transport for run, demo and test: native (the NIC in C), python (the
# reference) or auto (native when it builds); empty: the spec's `nic:` (default auto).
NIC      ?=
# Machines to run the fabric on (Mininet cluster mode, docs/fabric.md), e.g. "10.0.0.2 10.0.0.3".
SERVERS  ?=

# Python writes its compiled modules (__pycache__/, which `make clean` removes) even where
# the environment asks it not to (PYTHONDONTWRITEBYTECODE, as some CI images set): a fabric
# and the suite start hundreds of Python processes -- agents, switches, controllers, test
# workers -- and without the caches each compiles the project's modules again (the suite:
# 5:53 -> 4:57 min of CPU; docs/fabric.md, Start-up time).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup test run bench clean stop inspect demo fuzz

setup: $(STAMP)

# The Makefile too: a package added to APT_PKGS is installed on machines set up before.
# The venv comes from Debian's python so that --system-site-packages sees Debian's mininet,
# and Debian's pip (python3-pip) fills it: a pip of its own (ensurepip, then an upgrade
# from PyPI) cost every fresh setup ~5 s and nothing else uses it. apt-get runs beside
# pip unless pip itself is among what it installs (VENV_PKGS): a fresh setup takes the
# longer of the two, not their sum. pip leaves the packages uncompiled (--no-compile):
# compiling every module it installs (scapy's contrib, matplotlib's backends...) took 8.6 s
# of a fresh setup's 21.5; Python compiles the few hundred a run imports as it first
# imports them (~2.5 s, once: `__pycache__` is written, see above).
$(STAMP): pyproject.toml Makefile
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	apt_pid=""; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install$$missing"; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections; \
	  apt_install() { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; }; \
	  first=""; for p in $(VENV_PKGS); do case " $$missing " in *" $$p "*) first=1;; esac; done; \
	  if [ -n "$$first" ]; then apt_install || exit 1; else apt_install & apt_pid=$$!; fi; \
	fi; \
	test -x $(PY) || /usr/bin/python3 -m venv --system-site-packages --without-pip $(VENV) || exit 1; \
	echo "$(PY) -m pip install -e '.[test]'"; \
	$(PY) -m pip install -q --no-compile --disable-pip-version-check -e '.[test]'; pip_rc=$$?; \
	if [ -n "$$apt_pid" ]; then wait $$apt_pid || exit 1; fi; \
	exit $$pip_rc
	touch $@

# Two workers: the namespace tests one after another, the unit tests beside them
# (tests/conftest.py says how the suite is laid out).
test: setup
	ASTRAL_NIC=$(NIC) $(PY) -m pytest -q -n 2 --dist loadgroup tests

# The fuzz and fault campaigns of `make test`, long (docs/robustness.md): hostile P4Runtime
# requests (FUZZ_EXAMPLES hypothesis examples, ~5.5 requests each), FUZZ_FRAMES random and
# mutated frames into a running switch, malformed control messages, faults injected into a
# fabric with GOR (a cable flapping for FUZZ_FLAP_S); ends with the figures (crashes, hangs,
# internal errors, corrupted state...).
FUZZ_EXAMPLES ?= 2000
FUZZ_FRAMES   ?= 100000
FUZZ_FLAP_S   ?= 10
FUZZ_TESTS    := tests/test_runtime_fuzz.py tests/test_switch_fuzz_frames.py tests/test_control_fuzz.py \
                 tests/test_faults_fabric.py tests/test_native_differential.py tests/test_native_sanitized.py \
                 tests/test_nic_sanitize.py
fuzz: setup
	P4SIM_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) P4SIM_FUZZ_FRAMES=$(FUZZ_FRAMES) P4SIM_FUZZ_FLAP_S=$(FUZZ_FLAP_S) \
	  $(PY) -m pytest -q $(FUZZ_TESTS)

# The fabric from a spec (FABRIC=path.yaml), switches of BACKEND (p4sim, or bmv2 when
# simple_switch_grpc and p4c are installed); the prompt also reads a pipe or file.
run: setup
	$(if $(RATE),$(PY) -m topo.atrate $(FABRIC) $(RATE) $(RATE_FABRIC))
	ASTRAL_NIC=$(NIC) $(PY) -m testbed.run --fabric $(RUN_FABRIC) --backend $(BACKEND) --servers "$(SERVERS)"

bench: setup
	$(PY) -m bench

# The five configurations (stock, stock-gor, rail, orthogonal, gor) on one fabric, or SCENARIO=failure|tenants|incast|moe:
# table on stdout, results/<run>/summary.json and plots. FABRIC=, TRACE=, SEED=, REPEATS=, NIC=;
# PCAP=1: captures in every run directory (a fabric per run), for make inspect RUN=<run>/<config>/rep1.
demo: setup
	$(if $(RATE),$(PY) -m topo.atrate $(FABRIC) $(RATE) $(RATE_FABRIC))
	ASTRAL_NIC=$(NIC) $(PY) -m experiments --fabric $(RUN_FABRIC) $(if $(TRACE),--trace $(TRACE)) $(if $(SEED),--seed $(SEED)) \
	  $(if $(REPEATS),--repeats $(REPEATS)) $(if $(SCENARIO),--scenario $(SCENARIO)) $(if $(PCAP),--pcap)

# Summarise a run's captures (RUN=dir): tables, RUN/inspect.json, plots in RUN/plots.
inspect: setup
	@test -n "$(RUN)" || { echo "usage: make inspect RUN=<run directory>"; exit 2; }
	$(PY) -m insight $(RUN) --json $(RUN)/inspect.json --plots $(RUN)/plots

# Leftovers of a crashed run: `mn -c`, then the switch processes of build/run/*.pid (by PID).
stop:
	@if [ -x $(PY) ]; then $(PY) -m topo.cleanup; else mn -c >/dev/null 2>&1; fi

clean:
	rm -rf $(VENV) .venv-clients build *.egg-info bench/results/latest.json
	find . -name __pycache__ -prune -exec rm -rf {} +
