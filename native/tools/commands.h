// Subcommands of the moe-engine CLI; each takes its argv with argv[0] = the subcommand name.
#pragma once

int cmd_train(int argc, char** argv);
int cmd_forward(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_bench_bf16(int argc, char** argv);
int cmd_bench_layer(int argc, char** argv);
int cmd_bench_backend(int argc, char** argv);
int cmd_selftest(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_export(int argc, char** argv);
int cmd_esft(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_generate(int argc, char** argv);
