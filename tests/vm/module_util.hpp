// Guest tests: loading and unloading multiedge.ko, and small system helpers.
#pragma once

#include <string>

namespace metest {

// Path of the module under test: $ME_KO, else the tree's kernel/multiedge.ko.
std::string module_path();

// finit_module() with `params`; returns 0 or the errno.
int load_module(const std::string &params = "");
// delete_module("multiedge"); returns 0 or the errno.
int unload_module();
bool module_loaded();

// Runs a shell command; returns its exit status (-1 if it could not run).
int sh(const std::string &cmd);
// `modprobe name`, run once per process (a spawned process costs 0.1-0.2 s
// under TCG); returns the first run's exit status every time.
int modprobe(const std::string &name);

// Sends `count` 64-byte broadcast frames of `ethertype` out of `ifname`
// through a packet socket; false if any send failed.
bool send_frames(const char *ifname, unsigned ethertype, int count);

// Contents of a whole (proc) file.
std::string read_file(const std::string &path);

} // namespace metest
