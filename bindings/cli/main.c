/* The `protocall` command: Lua 5.4 with the protocall module preloaded,
 * and the subcommands of lua/protocall/cli/.
 *
 *   protocall COMMAND [flags] [args...]   (decode, encode, describe, list,
 *                                          call, help; `protocall help`)
 *   protocall run script [args...]        always runs the script
 *   protocall [options] [script [args...]]
 *     -e stat   run the Lua statement 'stat'
 *     -l mod    require 'mod' into the global 'mod'
 *     -v        print the version
 *     --        stop handling options
 *     -         run standard input
 * With no script and no -e, standard input runs when it is not a terminal
 * (`echo 'print(1)' | protocall`); on a terminal the usage is printed.
 *
 * A subcommand's name wins only when no regular file of that name exists,
 * so a script called `decode` next to the caller still runs as a script
 * (a directory of that name does not count).
 *
 * As Lua's own lua.c: 'arg' holds the script name at 0, its arguments at
 * 1..n and the command's options at negative indices; everything runs under
 * lua_pcall with a traceback handler; an error prints to stderr and the
 * command exits 1. */
#include "protocall.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *progname = "protocall";

static void print_usage(void) {
  fprintf(stderr,
          "usage: %s COMMAND [flags] [args]   (decode, encode, describe, list, call, help)\n"
          "       %s run script [args]\n"
          "       %s [options] [script [args]]\n"
          "Available options are:\n"
          "  -e stat   execute string 'stat'\n"
          "  -l mod    require library 'mod' into global 'mod'\n"
          "  -v        show version information\n"
          "  --        stop handling options\n"
          "  -         stop handling options and execute stdin\n"
          "`%s help` lists the commands; `%s help COMMAND` shows one.\n",
          progname, progname, progname, progname, progname);
}

static int report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "%s: %s\n", progname, msg ? msg : "(error object is not a string)");
    fflush(stderr);
    lua_pop(L, 1);
  }
  return status;
}

/* Message handler: append a traceback, and use __tostring on error objects
 * such as pc.Error. */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) {
      msg = lua_tostring(L, -1);
    } else {
      msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static int docall(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  int status = lua_pcall(L, narg, nres, base);
  lua_remove(L, base);
  return status;
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}

static int dolibrary(lua_State *L, const char *name) {
  lua_getglobal(L, "require");
  lua_pushstring(L, name);
  int status = docall(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, name);
  return report(L, status);
}

/* arg = { [-n..-1] = options, [0] = script, [1..] = script args } */
static void createargtable(lua_State *L, char **argv, int argc, int script) {
  lua_createtable(L, argc - script - 1, script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

static int runscript(lua_State *L, char **argv, int argc, int script) {
  const char *fname = argv[script];
  if (strcmp(fname, "-") == 0 && strcmp(argv[script - 1], "--") != 0) fname = NULL; /* stdin */
  int status = luaL_loadfile(L, fname);
  if (status == LUA_ERRFILE && fname != NULL && access(fname, F_OK) != 0 &&
      strpbrk(fname, "/.") == NULL) {
    /* a bare word that is no file: most likely a mistyped command */
    lua_pushfstring(L, "%s (and not a command: `protocall help` lists them)", lua_tostring(L, -1));
    lua_remove(L, -2);
  }
  if (status == LUA_OK) {
    int n = argc - script - 1;
    luaL_checkstack(L, n + 3, "too many arguments to script");
    for (int i = script + 1; i < argc; i++) lua_pushstring(L, argv[i]);
    status = docall(L, n, LUA_MULTRET);
  }
  return report(L, status);
}

/* Finds the script's index in argv (0 when there is none); -1 on a bad
 * option. Sets *version when -v is given. */
static int collectargs(char **argv, int argc, int *version) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || strcmp(a, "-") == 0) return i;
    if (strcmp(a, "--") == 0) return i + 1 < argc ? i + 1 : 0;
    if (strcmp(a, "-v") == 0) {
      *version = 1;
    } else if (strcmp(a, "-e") == 0 || strcmp(a, "-l") == 0) {
      if (++i >= argc) return -1;
    } else {
      return -1;
    }
  }
  return 0;
}

/* Runs standard input as a chunk (no script named, stdin not a terminal). */
static int runscript_stdin(lua_State *L) {
  int status = luaL_loadfile(L, NULL);
  if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
  return report(L, status);
}

/* The exit status a subcommand asked for (pmain's result when >= 0). */
static int command_status = -1;

/* Whether 'name' is a regular file (a script may be run by that name). */
static int regular_file(const char *name) {
  struct stat st;
  return stat(name, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whether argv[1] names a subcommand of lua/protocall/cli/ rather than a
 * script: one of the names, or --help / -h, and no regular file of that
 * name (a directory ./serve/ does not stop `protocall serve`). */
static int is_command(int argc, char **argv) {
  static const char *const names[] = {"call",   "list",     "describe", "decode",
                                      "encode", "validate", "serve",    "gateway",
                                      "help",   "--help",   "-h",       NULL};
  if (argc < 2) return 0;
  for (int i = 0; names[i] != NULL; i++) {
    if (strcmp(argv[1], names[i]) == 0) return argv[1][0] == '-' || !regular_file(argv[1]);
  }
  return 0;
}

static void preload_protocall(lua_State *L) {
  luaL_openlibs(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_protocall);
  lua_setfield(L, -2, "protocall");
  lua_pop(L, 1);
}

/* Runs `require("protocall.cli").main({argv[1], ...}, {stderr_is_terminal
 * = ...})` (after `require
 * "protocall"`, which registers the embedded Lua layer); its integer
 * result is the exit status. */
static int runcommand(lua_State *L, char **argv, int argc) {
  preload_protocall(L);
  createargtable(L, argv, argc, 0);
  int status = dolibrary(L, "protocall");
  if (status != LUA_OK) return status;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "protocall.cli");
  status = docall(L, 1, 1);
  if (status == LUA_OK) {
    lua_getfield(L, -1, "main");
    lua_createtable(L, argc - 1, 0);
    for (int i = 1; i < argc; i++) {
      lua_pushstring(L, argv[i]);
      lua_rawseti(L, -2, i);
    }
    lua_createtable(L, 0, 1); /* what Lua cannot see itself */
    lua_pushboolean(L, isatty(STDERR_FILENO));
    lua_setfield(L, -2, "stderr_is_terminal");
    status = docall(L, 2, 1);
    if (status == LUA_OK) command_status = (int)lua_tointeger(L, -1);
  }
  return report(L, status);
}

/* The protected main: all Lua work happens in here (as lua.c's pmain). */
static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int version = 0, ran = 0;
  luaL_checkversion(L);
  if (is_command(argc, argv)) {
    if (runcommand(L, argv, argc) != LUA_OK) return 0;
    lua_pushboolean(L, 1);
    return 1;
  }
  if (argc == 2 && strcmp(argv[1], "run") == 0 && !regular_file("run")) {
    fprintf(stderr, "%s run: a script expected\nusage: %s run SCRIPT [args]\n", progname, progname);
    command_status = 2;
    lua_pushboolean(L, 1);
    return 1;
  }
  if (argc >= 3 && strcmp(argv[1], "run") == 0) { /* protocall run FILE [args] */
    preload_protocall(L);
    createargtable(L, argv, argc, 2);
    if (runscript(L, argv, argc, 2) != LUA_OK) return 0;
    lua_pushboolean(L, 1);
    return 1;
  }
  int script = collectargs(argv, argc, &version);
  if (script < 0) {
    print_usage();
    return 0;
  }
  if (version) printf("protocall %s (%s)\n", PROTOCALL_VERSION, LUA_RELEASE);
  preload_protocall(L);
  createargtable(L, argv, argc, script > 0 ? script : 0);
  int last = script > 0 ? script : argc;
  for (int i = 1; i < last; i++) {
    if (strcmp(argv[i], "-e") == 0) {
      const char *code = argv[++i];
      ran = 1;
      if (dochunk(L, luaL_loadbuffer(L, code, strlen(code), "=(command line)")) != LUA_OK) return 0;
    } else if (strcmp(argv[i], "-l") == 0) {
      if (dolibrary(L, argv[++i]) != LUA_OK) return 0;
    }
  }
  if (script > 0) {
    if (runscript(L, argv, argc, script) != LUA_OK) return 0;
  } else if (!ran && !version) {
    if (isatty(STDIN_FILENO)) { /* no interactive mode: say how to use it */
      print_usage();
      return 0;
    }
    if (runscript_stdin(L) != LUA_OK) return 0; /* as lua.c: run what is piped in */
  }
  lua_pushboolean(L, 1);
  return 1;
}

int main(int argc, char **argv) {
  if (argv[0] && argv[0][0]) progname = argv[0];
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "%s: cannot create state: not enough memory\n", progname);
    return EXIT_FAILURE;
  }
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = lua_pcall(L, 2, 1, 0);
  int ok = lua_toboolean(L, -1);
  report(L, status);
  lua_close(L);
  if (ok && status == LUA_OK && command_status >= 0) return command_status;
  return (ok && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
