/* The C ABI, compiled as C and linked against the shared library: names, versions, defaults,
 * buffer sizes, and bad input refused with a message before any device is touched (runs without a
 * GPU). Exit 0 when every check holds, 1 otherwise. */
#include <stdio.h>
#include <string.h>

#include "arfusion/arfusion_c.h"

static int failures = 0;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

/* A refusal: the status, and a message in arfusion_last_error() that mentions `what`. */
static void expectInvalid(arfusion_status_t s, const char* what) {
  CHECK(s == ARFUSION_INVALID_ARGUMENT);
  if (strstr(arfusion_last_error(), what) == NULL) {
    fprintf(stderr, "FAILED: message \"%s\" does not mention \"%s\"\n", arfusion_last_error(), what);
    ++failures;
  }
}

int main(void) {
  int major = -1, minor = -1, patch = -1;
  arfusion_version(&major, &minor, &patch);
  CHECK(major == 0 && minor == 5 && patch >= 0);
  CHECK(strcmp(arfusion_status_string(ARFUSION_SUCCESS), "kSuccess") == 0);
  CHECK(strlen(arfusion_status_string(ARFUSION_MISMATCH)) > 0);

  arfusion_config_t cfg;
  memset(&cfg, 0x5a, sizeof cfg);
  arfusion_config_init(&cfg);
  CHECK(cfg.version == ARFUSION_C_CONFIG_VERSION && cfg.strategy == ARFUSION_STRATEGY_AUTO && cfg.sync_mode == ARFUSION_SYNC_AUTO);
  CHECK(cfg.workspace_bytes == ((size_t)256 << 20) && cfg.timeout_seconds == 10.0 && cfg.tuning_file == NULL);
  CHECK(cfg.self_check == 1 && cfg.max_blocks == 0 && cfg.read_env == 1);

  arfusion_norm_args_t a;
  memset(&a, 0x5a, sizeof a);
  arfusion_norm_args_init(&a);
  CHECK(a.version == ARFUSION_C_NORM_ARGS_VERSION && a.input == NULL && a.quant_values == NULL);
  CHECK(a.dtype == ARFUSION_BFLOAT16 && a.eps > 0.f && a.quant_format == ARFUSION_QUANT_NONE && a.gemma == 0);

  /* Buffer sizes: NVFP4 in the swizzled layout pads to 128 rows and 4 scale columns. */
  size_t values = 0, scales = 0;
  CHECK(arfusion_quant_buffer_bytes(ARFUSION_QUANT_NVFP4, ARFUSION_LAYOUT_SWIZZLED_128X4, 1, 4096, &values, &scales) == ARFUSION_SUCCESS);
  CHECK(values == 2048 && scales == 128 * 256);
  CHECK(arfusion_quant_buffer_bytes(ARFUSION_QUANT_FP8_PER_TOKEN, ARFUSION_LAYOUT_LINEAR, 5, 1024, &values, &scales) == ARFUSION_SUCCESS);
  CHECK(values == 5 * 1024 && scales == 5 * 4);
  expectInvalid(arfusion_quant_buffer_bytes(9, ARFUSION_LAYOUT_LINEAR, 1, 4096, &values, &scales), "format");
  expectInvalid(arfusion_quant_buffer_bytes(ARFUSION_QUANT_NVFP4, ARFUSION_LAYOUT_COLUMN_MAJOR, 1, 4096, &values, &scales),
                "cannot hold");

  /* Bad input, refused before anything runs. */
  arfusion_comm_t comm = NULL;
  unsigned char id[ARFUSION_UNIQUE_ID_BYTES] = {0};
  expectInvalid(arfusion_comm_create(NULL, 2, 0, NULL, &comm), "unique_id");
  expectInvalid(arfusion_comm_create(id, 2, 2, NULL, &comm), "rank 2");
  CHECK(comm == NULL);
  cfg.strategy = 7;
  expectInvalid(arfusion_comm_create(id, 2, 0, &cfg, &comm), "strategy");
  arfusion_config_init(&cfg);
  cfg.version = 0;
  expectInvalid(arfusion_comm_create_nccl((void*)&cfg, &cfg, &comm), "version");
  expectInvalid(arfusion_comm_create_nccl(NULL, NULL, &comm), "nccl_comm");
  expectInvalid(arfusion_comm_destroy(NULL), "comm");
  CHECK(arfusion_allreduce(NULL, NULL, NULL, 1, 4096, ARFUSION_BFLOAT16, NULL) == ARFUSION_INVALID_ARGUMENT);
  CHECK(arfusion_comm_set_strategy(NULL, ARFUSION_STRATEGY_NCCL, ARFUSION_SYNC_AUTO) == ARFUSION_INVALID_ARGUMENT);
  arfusion_plan_t plan;
  CHECK(arfusion_plan(NULL, 1, 4096, ARFUSION_BFLOAT16, ARFUSION_OP_ALLREDUCE_ADD_RMSNORM, 0, &plan) == ARFUSION_INVALID_ARGUMENT);
  expectInvalid(arfusion_add_rmsnorm(NULL, NULL), "args");
  a.version = 99;
  expectInvalid(arfusion_add_rmsnorm(&a, NULL), "version");
  arfusion_norm_args_init(&a);
  a.tokens = 4, a.hidden = 4096;
  expectInvalid(arfusion_add_rmsnorm(&a, NULL), "null");  /* input is null */
  CHECK(arfusion_allreduce_add_rmsnorm_ex(NULL, &a, NULL) == ARFUSION_INVALID_ARGUMENT);

  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("C ABI: every check passed\n");
  return failures ? 1 : 0;
}
