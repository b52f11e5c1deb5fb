/* Validation with protovalidate's rules (buf/validate/validate.proto, built
 * in: core/schema/protos): the `(buf.validate.field)`, `(buf.validate.message)`
 * and `(buf.validate.oneof)` options of a pool's types, checked on messages.
 *
 *   pc_Validator *v = pc_Validator_New(NULL, NULL);
 *   switch (pc_Validator_Validate(v, msg, type, &err)) {
 *   case kPc_Validate_Valid: ...
 *   case kPc_Validate_Invalid:
 *     for (i = 0; i < pc_Validator_ViolationCount(v); i++) {
 *       const pc_Violation *x = pc_Validator_Violation(v, i);
 *       ... x->field ("items[2].name"), x->rule ("string.min_len"), x->message ...
 *     }
 *   default: ... err.msg: a rule that does not compile, or fails to evaluate ...
 *   }
 *
 * The rules, as protovalidate's runtimes apply them: a field's `required`
 * and `ignore`, its custom CEL rules (`cel`, `cel_expression`), the standard
 * rules of its type (StringRules, Int32Rules, ..., RepeatedRules with
 * `items`, MapRules with `keys` and `values`, the well-known types' rules),
 * a message field's own message validated in turn (field paths joined as
 * "a.b[2]", map keys as `m["k"]` or `m[3]`), the message's CEL rules and
 * its `oneof` rules, a oneof's `required`. Each standard rule is the CEL
 * expression validate.proto gives it (`(buf.validate.predefined).cel` on
 * the fields of the *Rules messages), compiled with core/cel once per rule
 * field and shared by every field that sets it; `enum.defined_only` and
 * `any.in` / `any.not_in`, which have no expression, are checked here.
 * Predefined rules of extensions to the *Rules messages are not read.
 *
 * A validator caches one plan per message type (built on first use, kept
 * as long as the validator) and the messages of the last validation; one
 * validator per thread (it is not shared), over types whose pool outlives
 * it. Nothing here raises, prints or aborts. */
#ifndef PC_VALIDATE_H
#define PC_VALIDATE_H

#include "base/arena.h"
#include "base/error.h"
#include "message/message.h"
#include "schema/def.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
  kPc_Validate_Valid = 0,
  kPc_Validate_Invalid, /* violations (pc_Validator_Violation) */
  kPc_Validate_Compile, /* a rule is wrong: CEL that does not compile, rules of another
                           type than the field's ("expected rule \"string\", got
                           \"int32\" on t.M.f"), a oneof rule naming no field */
  kPc_Validate_Runtime, /* a rule failed to evaluate (a CEL error, a result neither
                           bool nor string, a budget reached, messages nested
                           deeper than PC_MESSAGE_MAX_DEPTH) */
  kPc_Validate_NoMemory
} pc_ValidateStatus;

/* One rule a message breaks: protovalidate's buf.validate.Violation as
 * text. Strings are NUL-terminated and valid until the next validation. */
typedef struct {
  const char *field;   /* the path from the validated message: "name", "items[2].id",
                          "labels[\"k\"]", a oneof's name; "" for a message rule */
  const char *rule;    /* the rule's id: "string.min_len", "required", a custom rule's id */
  const char *message; /* "must be at least 1 characters" */
  int for_key;         /* a map key's rule (`map.keys`), not its value's */
} pc_Violation;

typedef struct pc_Validator pc_Validator;

/* A new validator (memory from 'alloc', NULL: pc_DefaultAlloc); NULL when
 * memory runs out. */
pc_Validator *pc_Validator_New(pc_Alloc *alloc, void *ud);
void pc_Validator_Free(pc_Validator *v);

/* With 'on' set, the validations that follow report an unset proto2
 * `required` field (editions: LEGACY_REQUIRED) as protovalidate's runtimes
 * do with their legacyRequired option: "value is required", rule
 * "legacy_required", and no other rule of that field runs. Off by default. */
void pc_Validator_SetLegacyRequired(pc_Validator *v, int on);

/* With 'max' above 0, the validations that follow keep at most 'max'
 * violations: finding one more stops the validation there (the result is
 * kPc_Validate_Invalid with those 'max') and pc_Validator_Truncated says
 * so. A request breaking a rule on each of a million items then costs
 * 'max' violations, not a million (the servers' and the gateway's refusal
 * keep 100). 0, the default: all of them. */
void pc_Validator_SetMaxViolations(pc_Validator *v, size_t max);

/* Whether the last validation stopped at the cap of
 * pc_Validator_SetMaxViolations, with more violations than it kept. */
int pc_Validator_Truncated(const pc_Validator *v);

/* Validates 'msg' of type 'm' (a pool with buf/validate/validate.proto
 * loaded, or every message is valid: no type can carry rules). With
 * 'fail_fast' set, stops at the first violation. 'now' is protovalidate's
 * `now` (the timestamp rules' lt_now, gt_now, within): seconds and nanos
 * since the epoch, or NULL for the system clock's. */
pc_ValidateStatus pc_Validator_Validate(pc_Validator *v, const pc_Message *msg,
                                        const pc_MessageDef *m, int fail_fast, const int64_t now[2],
                                        pc_Error *err);

/* The violations of the last validation, in the order protovalidate's
 * runtimes find them: the fields in declaration order (each field's
 * required, custom rules, standard rules, then its items or entries and its
 * message), then the message's CEL rules, its oneof rules and its oneofs. */
size_t pc_Validator_ViolationCount(const pc_Validator *v);
const pc_Violation *pc_Validator_Violation(const pc_Validator *v, size_t i);

/* Message types planned so far, and bytes the plans and programs hold. */
size_t pc_Validator_PlanCount(const pc_Validator *v);

/* CEL programs the last validation evaluated (a standard rule checked in C
 * and passing runs none). */
size_t pc_Validator_CelCount(const pc_Validator *v);

#endif
