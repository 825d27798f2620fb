/*
 * hb_gpu.h - the heartbeat's GPU signal (docs/heartbeat.md "utilisation and network"):
 * the node's GPU utilisation and SM clock ratio from NVML (core/nvml.h, loaded at run
 * time), sampled on the beat thread of the one client per node that measures its node.
 *
 *   gpu_util  the mean over the node's GPUs of NVML's utilisation (the share of the
 *             driver's last sample period in which a kernel ran), 0..1
 *   sm_clock  the minimum over the node's GPUs of SM clock / maximum SM clock, 0..1:
 *             a GPU that throttles (heat, power cap) runs its SMs below the others'
 *
 * The node's GPUs: those CUDA_VISIBLE_DEVICES lists (indices, or GPU-... UUIDs), else
 * every GPU NVML reports. No library, no GPU, or a driver that answers neither query:
 * hb_gpu_open gives NULL and no field is sent (the supervisor judges CPU busy time).
 */
#ifndef GRIT_HEARTBEAT_HB_GPU_H
#define GRIT_HEARTBEAT_HB_GPU_H

#include "core/nvml.h"

#define HB_GPU_MAX 64

typedef struct hb_gpu {
    nvml_api api;
    int n;                      /* GPUs sampled */
    nvml_dev dev[HB_GPU_MAX];
    unsigned max_mhz[HB_GPU_MAX]; /* 0: no maximum known (no clock ratio) */
} hb_gpu;

/* Loads NVML ($GRIT_NVML_LIB, nvml.h), initialises it and picks the node's GPUs; NULL
 * when there is none it can sample (nothing is printed: no GPU is the common case). */
hb_gpu *hb_gpu_open(void);

/* One sample: *util (0..1, NAN when no GPU answered) and *clock (0..1, NAN likewise). */
void hb_gpu_sample(hb_gpu *g, double *util, double *clock);

/* Shuts NVML down and frees g; NULL is a no-op. */
void hb_gpu_close(hb_gpu *g);

#endif
