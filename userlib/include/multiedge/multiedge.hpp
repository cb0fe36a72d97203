// libmultiedge: RDMA-style remote memory over Ethernet.  Include this.
#pragma once

#include "multiedge/device.hpp"
#include "multiedge/error.hpp"
#include "multiedge/uring.hpp"
#include "multiedge/version.hpp"
