# astral-testbed: `make run` launches the fabric, `make test` runs every test.
# Both set the machine up first (idempotent), so a fresh Debian 12 needs nothing else.

VENV     := .venv
PY       := $(VENV)/bin/python
STAMP    := $(VENV)/.installed
# Debian packages: Mininet needs its own `mnexec` (pip's mininet lacks it), ping for
# reachability checks, cpp for the P4 preprocessor (as p4c uses it), tcpdump to read pcaps,
# tshark to decode them as Wireshark does, chromium to render the demo's report in tests.
APT_PKGS := mininet iputils-ping iproute2 ethtool tcpdump tshark chromium cpp python3-venv python3-dev
FABRIC   ?= topo/fabrics/default.yaml
BACKEND  ?= p4sim

.PHONY: setup test run bench clean stop inspect demo

setup: $(STAMP)

# The Makefile too: a package added to APT_PKGS is installed on machines set up before.
$(STAMP): pyproject.toml Makefile
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install$$missing"; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	# The venv comes from Debian's python so that --system-site-packages sees Debian's mininet.
	test -x $(PY) || /usr/bin/python3 -m venv --system-site-packages $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

test: setup
	$(PY) -m pytest -q tests

# The fabric from a spec (FABRIC=path.yaml), switches of BACKEND (p4sim, or bmv2 when
# simple_switch_grpc and p4c are installed); the prompt also reads a pipe or file.
run: setup
	$(PY) -m testbed.run --fabric $(FABRIC) --backend $(BACKEND)

bench: setup
	$(PY) -m bench

# The five configurations (stock, stock-gor, rail, orthogonal, gor) on one fabric, or SCENARIO=failure|tenants|incast:
# table on stdout, results/<run>/summary.json and plots. FABRIC=, TRACE=, SEED=, REPEATS=;
# PCAP=1: captures in every run directory (a fabric per run), for make inspect RUN=<run>/<config>/rep1.
demo: setup
	$(PY) -m experiments --fabric $(FABRIC) $(if $(TRACE),--trace $(TRACE)) $(if $(SEED),--seed $(SEED)) \
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
