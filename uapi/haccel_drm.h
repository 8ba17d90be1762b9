/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * haccel_drm.h - the ABI of haccel.ko, the pinned host memory broker.
 *
 * The driver is a DRM render-node driver (DRIVER_GEM | DRIVER_RENDER) on a
 * software-only device; every ioctl here is allowed on its render node and
 * its primary node alike. Userspace allocates its memory (anonymous,
 * hugetlb or shmem, bound to a NUMA node) and asks the driver to pin those
 * pages long-term as a GEM buffer object; the same memory stays
 * registrable with CUDA and io_uring. Handles are closed with
 * DRM_IOCTL_GEM_CLOSE and shared as dma-bufs with
 * DRM_IOCTL_PRIME_HANDLE_TO_FD.
 *
 * Rules every struct here follows (Documentation/process/botching-up-ioctls.rst):
 * fixed-width fields, __u64 for user pointers, sizes a multiple of 8,
 * explicit padding that must be zero, a flags field everywhere, unknown
 * flags rejected with -EINVAL. Structs only grow at the end; a struct
 * shorter than its first version is rejected with -EINVAL, a longer one is
 * accepted only if the bytes the driver does not know are all zero (else
 * -E2BIG). docs/abi.md is the full reference.
 *
 * Installed by `make install` as <haccel_drm.h>; it includes "drm.h" as the
 * kernel's DRM uapi headers do, so userspace compiles it with
 * `pkg-config --cflags libdrm` on the include path.
 */
#ifndef _HACCEL_DRM_H_
#define _HACCEL_DRM_H_

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

/*
 * Version of this ABI, reported by HACCEL_PARAM_UAPI_VERSION as
 * (major << 16) | minor. Numeric order is version order.
 *
 * A minor bump only adds (new ioctls, params, flags, capability bits or
 * trailing struct fields, each announced by a HACCEL_CAP_* bit); a major
 * bump changes meaning and is incompatible. The handshake at open goes both
 * ways: userspace built against HACCEL_UAPI_VERSION accepts a driver when
 *
 *   HACCEL_UAPI_VERSION_MAJOR(driver) == HACCEL_UAPI_MAJOR and
 *   driver's HACCEL_PARAM_UAPI_MIN_VERSION <= HACCEL_UAPI_VERSION
 *
 * and refuses it otherwise, naming both versions. Features newer than
 * minor 0 are detected through HACCEL_PARAM_CAPS, never by comparing minors.
 */
#define HACCEL_UAPI_MAJOR 1
#define HACCEL_UAPI_MINOR 0
#define HACCEL_UAPI_VERSION_ENCODE(major, minor) \
	((((__u64)(major) & 0xffff) << 16) | ((__u64)(minor) & 0xffff))
#define HACCEL_UAPI_VERSION \
	HACCEL_UAPI_VERSION_ENCODE(HACCEL_UAPI_MAJOR, HACCEL_UAPI_MINOR)
#define HACCEL_UAPI_VERSION_MAJOR(v) ((__u32)(((v) >> 16) & 0xffff))
#define HACCEL_UAPI_VERSION_MINOR(v) ((__u32)((v) & 0xffff))

/* Name reported by DRM_IOCTL_VERSION, to find the device among render nodes. */
#define HACCEL_DRIVER_NAME "haccel"

#define DRM_HACCEL_GET_PARAM	0x00
#define DRM_HACCEL_PIN		0x01
#define DRM_HACCEL_BO_INFO	0x02
#define DRM_HACCEL_STATS	0x03
#define DRM_HACCEL_QUOTA_GET	0x04
#define DRM_HACCEL_QUOTA_SET	0x05

#define DRM_IOCTL_HACCEL_GET_PARAM \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_HACCEL_GET_PARAM, struct drm_haccel_param)
#define DRM_IOCTL_HACCEL_PIN \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_HACCEL_PIN, struct drm_haccel_pin)
#define DRM_IOCTL_HACCEL_BO_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_HACCEL_BO_INFO, struct drm_haccel_bo_info)
#define DRM_IOCTL_HACCEL_STATS \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_HACCEL_STATS, struct drm_haccel_stats)
#define DRM_IOCTL_HACCEL_QUOTA_GET \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_HACCEL_QUOTA_GET, struct drm_haccel_quota)
#define DRM_IOCTL_HACCEL_QUOTA_SET \
	DRM_IOW(DRM_COMMAND_BASE + DRM_HACCEL_QUOTA_SET, struct drm_haccel_quota)

/* Parameters of DRM_IOCTL_HACCEL_GET_PARAM. */
/* This driver's ABI version, encoded as HACCEL_UAPI_VERSION is. */
#define HACCEL_PARAM_UAPI_VERSION	0
/* The oldest userspace ABI version this driver still serves. */
#define HACCEL_PARAM_UAPI_MIN_VERSION	1
/* HACCEL_CAP_* bits of what this driver supports. */
#define HACCEL_PARAM_CAPS		2
/* Node ids run from 0 to this value - 1 (nr_node_ids); some may be offline. */
#define HACCEL_PARAM_NUM_NODES		3
/* Granularity of PIN: address and size are multiples of this (PAGE_SIZE). */
#define HACCEL_PARAM_PAGE_SIZE		4
/* Largest size one PIN accepts, in bytes. */
#define HACCEL_PARAM_MAX_PIN_SIZE	5

/* Capability bits (HACCEL_PARAM_CAPS). */
/* PIN takes HACCEL_PIN_STRICT_NODE. */
#define HACCEL_CAP_PIN_STRICT_NODE	(1ULL << 0)
/* Buffers export as dma-bufs (DRM_IOCTL_PRIME_HANDLE_TO_FD). */
#define HACCEL_CAP_PRIME_EXPORT		(1ULL << 1)
/* Exported dma-bufs can be mmap()ed (MAP_SHARED) by an importer. */
#define HACCEL_CAP_PRIME_MMAP		(1ULL << 2)
/* QUOTA_GET/QUOTA_SET carry a per-client limit besides the node-wide one. */
#define HACCEL_CAP_CLIENT_QUOTA		(1ULL << 3)

/**
 * struct drm_haccel_param - read one driver parameter (DRM_IOCTL_HACCEL_GET_PARAM)
 */
struct drm_haccel_param {
	/** @param: in: which parameter, a HACCEL_PARAM_* value. */
	__u32 param;
	/** @flags: in: no flags are defined; must be 0. */
	__u32 flags;
	/** @value: out: the parameter's value. */
	__u64 value;
};

/*
 * Expected node of DRM_IOCTL_HACCEL_PIN (and node of QUOTA_SET) meaning "any"
 * (respectively "every node").
 */
#define HACCEL_DRM_NODE_ANY			0xffffffffU

/* PIN flags. */
/* Fail with -EXDEV if any page is not on the expected node. */
#define HACCEL_PIN_STRICT_NODE		(1U << 0)
#define HACCEL_PIN_FLAGS		(HACCEL_PIN_STRICT_NODE)

/**
 * struct drm_haccel_pin - pin user memory as a buffer object (DRM_IOCTL_HACCEL_PIN)
 *
 * The pages of [@addr, @addr + @size) are faulted in if needed and pinned
 * long-term (FOLL_LONGTERM | FOLL_WRITE): the range must be writable
 * memory that no file system writes back, i.e. anonymous, hugetlb or shmem
 * (memfd, tmpfs, MAP_SHARED | MAP_ANONYMOUS) mappings. Any other mapping
 * in the range (a file on a disk file system, shared or private) fails the
 * call with -EOPNOTSUPP before anything is pinned; a hole or a
 * VM_IO/VM_PFNMAP mapping with -EFAULT (the mappings are checked in
 * address order), and then a page not writable with -EFAULT too. The
 * pages stay pinned until the buffer's last reference goes: its handles
 * closed (DRM_IOCTL_GEM_CLOSE or the file closed, which includes process
 * death) and every dma-buf exported from it released. The bytes count
 * against the quotas of the nodes the pages are on, charged to this file;
 * over quota the call fails with -EDQUOT and pins nothing. A fatal signal
 * while pinning fails it with -EINTR, pinning nothing.
 *
 * Before pinning, the driver makes sure the struct can be written back, so
 * one in read-only memory fails with -EFAULT and pins nothing.
 */
struct drm_haccel_pin {
	/** @addr: in: start of the range, a multiple of HACCEL_PARAM_PAGE_SIZE. */
	__u64 addr;
	/**
	 * @size: in: length in bytes, a non-zero multiple of
	 * HACCEL_PARAM_PAGE_SIZE, at most HACCEL_PARAM_MAX_PIN_SIZE.
	 */
	__u64 size;
	/**
	 * @node: in: NUMA node the pages are expected on, or HACCEL_DRM_NODE_ANY.
	 * A node must be online. Without HACCEL_PIN_STRICT_NODE it is only
	 * used to fail early when the size cannot fit that node's quota.
	 */
	__u32 node;
	/** @flags: in: HACCEL_PIN_* flags; others are rejected. */
	__u32 flags;
	/** @handle: out: GEM handle of the new buffer object. */
	__u32 handle;
	/** @pad: must be 0. */
	__u32 pad;
};

/**
 * struct drm_haccel_bo_info - describe a buffer object (DRM_IOCTL_HACCEL_BO_INFO)
 *
 * @node_pages points to an array of @num_nodes __u64; the driver fills
 * min(@num_nodes, HACCEL_PARAM_NUM_NODES) entries, entry i the number of
 * the buffer's pages on node i, and sets @num_nodes to
 * HACCEL_PARAM_NUM_NODES, so a first call with @num_nodes 0 sizes the array.
 */
struct drm_haccel_bo_info {
	/** @handle: in: GEM handle of the buffer. */
	__u32 handle;
	/** @flags: in: no flags are defined; must be 0. */
	__u32 flags;
	/** @size: out: size of the buffer in bytes. */
	__u64 size;
	/**
	 * @addr: out: user address the buffer was pinned from, in the
	 * process that pinned it; 0 when asked through another file (an
	 * imported dma-buf), so no address leaks to another process.
	 */
	__u64 addr;
	/** @node_pages: in: user pointer to __u64[@num_nodes], or 0. */
	__u64 node_pages;
	/** @num_nodes: in: entries at @node_pages; out: HACCEL_PARAM_NUM_NODES. */
	__u32 num_nodes;
	/** @pad: must be 0. */
	__u32 pad;
};

/**
 * struct drm_haccel_stats - pinned memory, node-wide and this file's (DRM_IOCTL_HACCEL_STATS)
 *
 * Both arrays follow the @node_pages rule of struct drm_haccel_bo_info.
 * All values are one snapshot, taken under the accounting lock.
 */
struct drm_haccel_stats {
	/**
	 * @node_bytes: in: user pointer to __u64[@num_nodes], or 0; out there:
	 * bytes pinned on each node by every client.
	 */
	__u64 node_bytes;
	/**
	 * @client_bytes: in: user pointer to __u64[@num_nodes], or 0; out
	 * there: bytes pinned on each node charged to this file.
	 */
	__u64 client_bytes;
	/** @num_nodes: in: entries in each array; out: HACCEL_PARAM_NUM_NODES. */
	__u32 num_nodes;
	/** @flags: in: no flags are defined; must be 0. */
	__u32 flags;
	/** @node_total: out: bytes pinned on all nodes by every client. */
	__u64 node_total;
	/** @client_total: out: bytes pinned on all nodes charged to this file. */
	__u64 client_total;
	/** @node_bos: out: live buffer objects of every client. */
	__u64 node_bos;
	/** @client_bos: out: live buffer objects charged to this file. */
	__u64 client_bos;
};

/* A limit meaning "no limit". */
#define HACCEL_QUOTA_UNLIMITED		(~0ULL)

/**
 * struct drm_haccel_quota - limits of one node (DRM_IOCTL_HACCEL_QUOTA_GET, _SET)
 *
 * A PIN fails with -EDQUOT when, on any node its pages are on, it would
 * take that node's pinned bytes over @node_limit or the file's pinned bytes
 * on that node over @client_limit. The check and the charge are one atomic
 * step, so the charged bytes never exceed a limit; the charge follows the
 * pin, so while PINs are in flight up to their sizes may be pinned but not
 * yet charged (or refused). QUOTA_GET is open to every client; QUOTA_SET
 * validates its arguments (-EINVAL), then needs CAP_SYS_ADMIN (-EPERM
 * without). Lowering a limit below what is pinned unpins nothing: later
 * PINs fail until usage drops.
 */
struct drm_haccel_quota {
	/**
	 * @node: in: the node, online; for QUOTA_SET also HACCEL_DRM_NODE_ANY,
	 * which sets every node.
	 */
	__u32 node;
	/** @flags: in: no flags are defined; must be 0. */
	__u32 flags;
	/**
	 * @node_limit: GET out, SET in: most bytes all clients together may
	 * pin on the node, or HACCEL_QUOTA_UNLIMITED.
	 */
	__u64 node_limit;
	/**
	 * @client_limit: GET out, SET in: most bytes one client (open file)
	 * may pin on the node, or HACCEL_QUOTA_UNLIMITED.
	 */
	__u64 client_limit;
};

#if defined(__cplusplus)
}
#endif

#endif /* _HACCEL_DRM_H_ */
