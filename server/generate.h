/* server/generate.h — `tram generate`: runs prompts through the engine
 * without HTTP, all at once (like transformers' generate_batch), and prints
 * each output and the throughput.
 *
 *   tram generate -m MODEL -p "PROMPT" [-n MAX_TOKENS] [OPTIONS] [SETTINGS]
 *   tram generate -m MODEL --prompts FILE [OPTIONS] [SETTINGS]
 *
 * FILE holds one prompt per line, or JSON lines with per-prompt parameters
 * (prompt, max_tokens, temperature, top_k, top_p, min_p, seed (an integer,
 * or a decimal string for all 64 bits), n, stop,
 * stop_token_ids, ignore_eos, repetition_penalty, presence_penalty,
 * frequency_penalty, chat), where the command line's options are the
 * defaults. The generation fields are read by the OpenAI parsers' table
 * (oai_parse_gen_fields: the same ranges and messages as the API), with
 * the engine's limits (SCHED_MAX_*) for n and the stop conditions. Two more keys help test scheduling: arrive_step (submit the
 * prompt once the engine has run that many steps) and cancel_after (cancel
 * the request after that many tokens of its first completion).
 *
 * SETTINGS are tram's (config/cfg.h): model, device, threads, kv_cache_*,
 * block_size, max_batch_tokens, max_seqs, max_model_len. With --json the
 * output is one JSON object per prompt and a last {"stats": ...} line. */
#ifndef TRAM_GENERATE_H
#define TRAM_GENERATE_H

/* Runs the command for argv[0..argc) (the arguments after "generate").
 * Returns the exit status: 0, 1 (a failure while running), 2 (usage,
 * configuration or input error). */
int gen_main(int argc, char **argv);

#endif
