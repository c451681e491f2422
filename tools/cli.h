/*
 * tools/cli.h - the tracevm command's subcommands kept in files of their
 * own.  Like the rest of the command, they use only include/tracevm.h.
 */
#ifndef TOOLS_CLI_H
#define TOOLS_CLI_H

/* tracevm attach TARGET COMMAND ... (tools/attach.c); the exit status. */
int cmd_attach(int argc, char **argv);

#endif /* TOOLS_CLI_H */
