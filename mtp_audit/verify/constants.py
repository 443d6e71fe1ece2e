"""Sizes, step counts and the worker's refusal exit code, shared by the verify worker (which imports
torch) and the code that starts it, emits its tests or reports on it (which does not)."""

VOCAB = 1040  # not a multiple of 64 * TP: the last shard keeps padding rows; 16 | VOCAB for clustered vocabularies
ORG_VOCAB = VOCAB - 40  # a processor's org_vocab_size below the head's rows (in the last shard at TP 2)
TARGET_VOCAB = 2 * VOCAB + 13  # the target's vocabulary when a draft-to-target map is built
HIDDEN = 64
NUM_STEPS = 3  # fabricated MTP steps
# spec_step_idx tried: past the layer count too, since the multi-module speculator's steps run to
# num_speculative_steps - 1 and the drafter wraps them (``spec_step_idx % num_mtp_layers``)
STEPS_TRIED = 2 * NUM_STEPS
START_LAYER = STEPS_TRIED + 2  # fabricated mtp_start_layer_idx: above every step, so [step] and [start + step] differ
MAX_TP = 8  # verify --tp sizes, at most: one worker process per rank (TP 8: a whole 8-GPU node)
MAX_VARIANTS = 8  # distinct configurations run per drafter, at most: the rest are named as not run
MAX_RUNS = 2 * MAX_VARIANTS  # configurations built, duplicates of one already run included
FOREIGN_VLLM_EXIT = 2  # a worker that imported a vLLM from outside the tree under test
WORKER_TIMEOUT_S = 1200.0  # verify --timeout's default; a whole --all sweep at one TP size takes 2-4 min on 2 CPUs
NOT_RUN_AS_CALLED = (
    "not run as called: "  # the detail of a record with a call form whose arguments only its caller holds
)
