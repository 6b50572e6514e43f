/* api/json_alloc.h — cJSON's allocator (cJSON_InitHooks), so that memory
 * running out while a request body is parsed is an answer (503), not an
 * abort, and not a "bad JSON" blamed on the client.
 *
 * Between json_alloc_begin() and json_alloc_end() on one thread (a request
 * body's parse, oai__parse_object), an allocation that fails returns NULL
 * to cJSON, which gives the parse up and frees what it built; end() then
 * says so. Everywhere else (building responses, tool calls, templates) a
 * failed allocation aborts, as base/alloc.h does.
 *
 * Test builds (base/fault.h): alloc_fail=N fails every Nth allocation made
 * inside those sections, so tests reach the path without exhausting memory. */
#ifndef TRAM_JSON_ALLOC_H
#define TRAM_JSON_ALLOC_H

#include <stdbool.h>

/* Installs the hooks; once, before cJSON is used by more than one thread
 * (srv_run does it at start). Without it cJSON uses malloc and a failed
 * parse is reported as a failed parse. */
void json_alloc_init(void);

/* Starts a section on this thread: its allocations may fail. */
void json_alloc_begin(void);

/* Ends the section; true when an allocation in it failed. */
bool json_alloc_end(void);

#endif
