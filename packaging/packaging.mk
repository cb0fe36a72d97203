# Installation on a real host (README "On a real Linux host"):
#
#   make install        the module into /lib/modules/$(KVER)/updates/ (then
#                       depmod), libmultiedge, its headers and pkg-config file,
#                       mectl, the libfabric provider (FABRICDIR), the udev rule, the modprobe options file, the
#                       boot configuration of NICs and its systemd unit
#   make uninstall      removes all of it
#   make dkms-install   the module's sources under /usr/src/multiedge-VERSION
#                       with a dkms.conf: dkms builds and installs it for the
#                       running kernel and again for every kernel installed later
#   make dkms-uninstall removes it from DKMS and /usr/src
#
# DESTDIR is honoured (then depmod, ldconfig, dkms and udevadm are not run).
# `make install` installs what `make` built and builds nothing itself: the
# module file is MODULE_KO, which must have been built for KVER.

SYSCONFDIR ?= /etc
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
UNITDIR    ?= $(PREFIX)/lib/systemd/system
MODULEDIR  ?= /lib/modules/$(KVER)/updates
MODULE_KO  ?= $(TOP)/kernel/multiedge.ko
# libfabric loads providers from its own directory (Debian 12:
# /usr/lib/x86_64-linux-gnu/libfabric), whatever PREFIX is.
FABRICDIR  ?= $(or $(shell pkg-config --variable=libdir libfabric 2>/dev/null),$(LIBDIR))/libfabric
DKMS_SRC   ?= /usr/src/multiedge-$(LIBME_VERSION)
# Who may open /dev/multiedge (udev rule), and the module's load options.
DEVICE_GROUP ?= multiedge
DEVICE_MODE  ?= 0660
MODULE_OPTIONS ?=

INSTALL ?= install
PKG := $(TOP)/packaging

# Files written with the settings above substituted.
PKG_OUT := $(BUILD)/packaging
subst = sed -e 's|@VERSION@|$(LIBME_VERSION)|g' -e 's|@GROUP@|$(DEVICE_GROUP)|g' \
	    -e 's|@MODE@|$(DEVICE_MODE)|g' -e 's|@OPTIONS@|$(MODULE_OPTIONS)|g' \
	    -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@BINDIR@|$(BINDIR)|g'

.PHONY: install uninstall dkms-install dkms-uninstall dkms-source install-check-module

# The settings are in the recipes' command lines, not in any prerequisite:
# always rewritten.
.PHONY: $(PKG_OUT)/60-multiedge.rules $(PKG_OUT)/multiedge.conf $(PKG_OUT)/multiedge.service \
	$(PKG_OUT)/dkms.conf
$(PKG_OUT)/60-multiedge.rules: $(PKG)/60-multiedge.rules.in
$(PKG_OUT)/multiedge.conf: $(PKG)/modprobe.conf.in
$(PKG_OUT)/multiedge.service: $(PKG)/multiedge.service.in
$(PKG_OUT)/dkms.conf: $(PKG)/dkms.conf.in
$(PKG_OUT)/60-multiedge.rules $(PKG_OUT)/multiedge.conf $(PKG_OUT)/multiedge.service \
$(PKG_OUT)/dkms.conf:
	@[ -n "$(DEVICE_GROUP)" ] && [[ "$(DEVICE_MODE)" =~ ^0[0-7]{3}$$ ]] || \
		{ echo "DEVICE_GROUP must be a group name and DEVICE_MODE like 0660" >&2; exit 1; }
	@mkdir -p $(@D)
	@$(subst) $< >$@

# The module must be the one built for KVER: a module for another kernel
# would not load.
install-check-module:
	@test -n "$(KVER)" || { echo "install: no KVER (no kernel headers found; set KDIR or KVER)" >&2; exit 1; }
	@test -f $(MODULE_KO) || { echo "install: $(MODULE_KO) missing; run make first" >&2; exit 1; }
	@v=$$(/sbin/modinfo -F vermagic $(MODULE_KO) | cut -d' ' -f1); [ "$$v" = "$(KVER)" ] || \
		{ echo "install: $(MODULE_KO) is built for $$v, not $(KVER)" >&2; exit 1; }

install: install-check-module $(LIBME_A) $(LIBME_SO) $(LIBME_PC) $(MECTL) $(MEFI_SO) \
		$(PKG_OUT)/60-multiedge.rules $(PKG_OUT)/multiedge.conf $(PKG_OUT)/multiedge.service
	$(INSTALL) -D -m 0644 $(MODULE_KO) $(DESTDIR)$(MODULEDIR)/multiedge.ko
	$(INSTALL) -D -m 0755 $(MECTL) $(DESTDIR)$(BINDIR)/mectl
	$(INSTALL) -D -m 0644 $(LIBME_SO) $(DESTDIR)$(LIBDIR)/$(notdir $(LIBME_SO))
	ln -sfn $(notdir $(LIBME_SO)) $(DESTDIR)$(LIBDIR)/$(LIBME_SONAME)
	ln -sfn $(LIBME_SONAME) $(DESTDIR)$(LIBDIR)/libmultiedge.so
	$(INSTALL) -m 0644 $(LIBME_A) $(DESTDIR)$(LIBDIR)/libmultiedge.a
	$(INSTALL) -D -m 0644 $(LIBME_PC) $(DESTDIR)$(LIBDIR)/pkgconfig/multiedge.pc
	$(INSTALL) -D -m 0644 $(MEFI_SO) $(DESTDIR)$(FABRICDIR)/libmultiedge-fi.so
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR)/multiedge
	$(INSTALL) -m 0644 $(wildcard $(TOP)/userlib/include/multiedge/*.hpp) $(DESTDIR)$(INCLUDEDIR)/multiedge/
	$(INSTALL) -m 0644 $(TOP)/uapi/multiedge.h $(DESTDIR)$(INCLUDEDIR)/multiedge/multiedge.h
	$(INSTALL) -D -m 0644 $(PKG_OUT)/60-multiedge.rules $(DESTDIR)$(SYSCONFDIR)/udev/rules.d/60-multiedge.rules
	$(INSTALL) -D -m 0644 $(PKG_OUT)/multiedge.conf $(DESTDIR)$(SYSCONFDIR)/modprobe.d/multiedge.conf
	$(INSTALL) -D -m 0644 $(PKG_OUT)/multiedge.service $(DESTDIR)$(UNITDIR)/multiedge.service
	@# The NIC list is the administrator's: kept if it exists.
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/multiedge/links.conf ]; then \
		echo "keeping $(DESTDIR)$(SYSCONFDIR)/multiedge/links.conf"; \
	else \
		echo "$(INSTALL) -D -m 0644 $(PKG)/links.conf $(DESTDIR)$(SYSCONFDIR)/multiedge/links.conf"; \
		$(INSTALL) -D -m 0644 $(PKG)/links.conf $(DESTDIR)$(SYSCONFDIR)/multiedge/links.conf; \
	fi
ifeq ($(DESTDIR),)
	/sbin/depmod -a $(KVER)
	-/sbin/ldconfig
	-udevadm control --reload 2>/dev/null
	-systemctl daemon-reload 2>/dev/null
endif

uninstall:
	rm -f $(DESTDIR)$(MODULEDIR)/multiedge.ko
	rm -f $(DESTDIR)$(BINDIR)/mectl
	rm -f $(DESTDIR)$(LIBDIR)/$(notdir $(LIBME_SO)) $(DESTDIR)$(LIBDIR)/$(LIBME_SONAME) \
	      $(DESTDIR)$(LIBDIR)/libmultiedge.so $(DESTDIR)$(LIBDIR)/libmultiedge.a \
	      $(DESTDIR)$(LIBDIR)/pkgconfig/multiedge.pc
	rm -f $(DESTDIR)$(FABRICDIR)/libmultiedge-fi.so
	rm -rf $(DESTDIR)$(INCLUDEDIR)/multiedge
	rm -f $(DESTDIR)$(SYSCONFDIR)/udev/rules.d/60-multiedge.rules \
	      $(DESTDIR)$(SYSCONFDIR)/modprobe.d/multiedge.conf \
	      $(DESTDIR)$(UNITDIR)/multiedge.service \
	      $(DESTDIR)$(SYSCONFDIR)/multiedge/links.conf
	-rmdir $(DESTDIR)$(SYSCONFDIR)/multiedge 2>/dev/null
ifeq ($(DESTDIR),)
	-/sbin/depmod -a $(KVER)
	-/sbin/ldconfig
	-udevadm control --reload 2>/dev/null
	-systemctl daemon-reload 2>/dev/null
endif

# The tree DKMS builds from: kernel/ (sources only, not the multiedge.mod.c
# of a build here) and uapi/, plus dkms.conf.
DKMS_KERNEL_C = $(notdir $(filter-out %.mod.c,$(wildcard $(TOP)/kernel/*.c)))
dkms-source: $(PKG_OUT)/dkms.conf
	rm -rf $(DESTDIR)$(DKMS_SRC)
	$(INSTALL) -d $(DESTDIR)$(DKMS_SRC)/kernel/core $(DESTDIR)$(DKMS_SRC)/uapi
	cd $(TOP)/kernel && $(INSTALL) -m 0644 Kbuild $(DKMS_KERNEL_C) *.h $(DESTDIR)$(DKMS_SRC)/kernel/
	cd $(TOP)/kernel/core && $(INSTALL) -m 0644 Kbuild.inc *.c *.h $(DESTDIR)$(DKMS_SRC)/kernel/core/
	$(INSTALL) -m 0644 $(TOP)/uapi/multiedge.h $(DESTDIR)$(DKMS_SRC)/uapi/
	$(INSTALL) -m 0644 $(PKG_OUT)/dkms.conf $(DESTDIR)$(DKMS_SRC)/dkms.conf

dkms-install: dkms-source
ifeq ($(DESTDIR),)
	dkms add -m multiedge -v $(LIBME_VERSION)
	dkms install -m multiedge -v $(LIBME_VERSION)
endif

dkms-uninstall:
	-dkms remove -m multiedge -v $(LIBME_VERSION) --all
	rm -rf $(DESTDIR)$(DKMS_SRC)
