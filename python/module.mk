# SPDX-License-Identifier: BSD-3-Clause
# python/slurm_ddp: the Python module of slurm-ddp (an agreed stop for
# PyTorch programs), pure Python, installed where the distribution's
# python3 finds packages that are not its own version's (Debian's
# /usr/lib/python3/dist-packages; the RPM sets its site-packages). From
# the build tree, PYTHONPATH=python reaches it.
PYTHONDIR ?= $(PREFIX)/lib/python3/dist-packages
PYTHON_SRC := $(sort $(wildcard python/slurm_ddp/*.py))

install-python:
	install -d $(DESTDIR)$(PYTHONDIR)/slurm_ddp
	install -m 0644 $(PYTHON_SRC) $(DESTDIR)$(PYTHONDIR)/slurm_ddp/
.PHONY: install-python
INSTALL_RULES += install-python
