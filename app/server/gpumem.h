/* Device memory of GPU 0 through NVML, when the driver provides it. */
#ifndef BRASA_SERVER_GPUMEM_H
#define BRASA_SERVER_GPUMEM_H
#include <stdbool.h>
#include <stdint.h>

/* Used and total bytes of device memory; false when no NVML or no device. */
bool gpumem_query(uint64_t *used, uint64_t *total, const char **name);

#endif
