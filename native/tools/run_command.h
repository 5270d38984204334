// The one main() both command-line programs share: help, the subcommand table, and turning an exception into
// exit code 1 with the program and command named (2 for usage errors).
#pragma once
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

struct Command {
  const char* name;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand's name
};

template <size_t N>
int run_command(const char* program, const char* usage, const Command (&commands)[N], int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fprintf(stderr, "%s", usage);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  for (const Command& c : commands) {
    if (cmd != c.name) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s %s: %s\n", program, cmd.c_str(), e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "%s: unknown command '%s'\n%s", program, cmd.c_str(), usage);
  return 2;
}
