/* params.h - the named parameters of a case: op parameters (window_size,
 * compress_ratio, ...) and input-generator options (query_lens, ...) in one
 * namespace, typed, stored as /params attributes in a golden. */
#ifndef DSV4_PARAMS_H
#define DSV4_PARAMS_H

#include <stdint.h>

#include "../ref/status.h"
#include "../ref/tensor.h"

typedef enum dsv4_ptype {
    DSV4_P_INT = 0,
    DSV4_P_FLOAT,
    DSV4_P_STR,
    DSV4_P_INTLIST
} dsv4_ptype;

#define DSV4_PARAM_STR_MAX 128
#define DSV4_PARAM_LIST_MAX 256
#define DSV4_MAX_PARAMS 40

typedef struct dsv4_param {
    char name[DSV4_NAME_MAX];
    dsv4_ptype type;
    int64_t i;
    double f;
    char s[DSV4_PARAM_STR_MAX];
    int n;                            /* INTLIST length */
    int64_t list[DSV4_PARAM_LIST_MAX];
} dsv4_param;

typedef struct dsv4_params {
    int n;
    dsv4_param p[DSV4_MAX_PARAMS];
} dsv4_params;

const char *dsv4_ptype_name(dsv4_ptype t);
const dsv4_param *dsv4_params_find(const dsv4_params *ps, const char *name);
/* Inserts or replaces. */
int dsv4_params_set(dsv4_params *ps, const dsv4_param *p, dsv4_status *st);
int dsv4_params_set_int(dsv4_params *ps, const char *name, int64_t v, dsv4_status *st);
/* Typed getters for values the registry has already validated and defaulted. */
int64_t dsv4_params_int(const dsv4_params *ps, const char *name);
double dsv4_params_float(const dsv4_params *ps, const char *name);
const char *dsv4_params_str(const dsv4_params *ps, const char *name);
/* INTLIST: returns the length and sets *vals (NULL if absent). */
int dsv4_params_list(const dsv4_params *ps, const char *name, const int64_t **vals);
/* Non-zero if the int-list param name holds v. */
int dsv4_params_list_has(const dsv4_params *ps, const char *name, int64_t v);
/* "name=value" for display; lists as "1,2,3". */
const char *dsv4_param_value_str(const dsv4_param *p, char *buf, size_t len);

#endif
