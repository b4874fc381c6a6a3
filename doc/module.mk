# SPDX-License-Identifier: BSD-3-Clause
# What a site reads: the admin guide, the README, the licence and the
# example batch script, in DOCDIR (the packages put them in their own
# documentation directories).
DOCDIR ?= $(PREFIX)/share/doc/slurm-ddp

install-doc:
	install -d $(DESTDIR)$(DOCDIR)/examples
	install -m 0644 README.md LICENSE doc/admin-guide.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 examples/train.sbatch $(DESTDIR)$(DOCDIR)/examples/train.sbatch
.PHONY: install-doc
INSTALL_RULES += install-doc
