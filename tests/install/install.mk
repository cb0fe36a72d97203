# Installation tests (scripts run by `make test`): make install/uninstall
# into a DESTDIR and the DKMS build for each test kernel on the host; a real
# installation (modprobe, udev rule, boot configuration) in each guest.
HOST_SCRIPTS  += $(TOP)/tests/install/install-destdir $(TOP)/tests/install/dkms-build
GUEST_SCRIPTS += $(TOP)/tests/install/guest-install
