#!/usr/bin/env python3
"""tests/check_recursion.py - no C recursion grows with a term.

    tests/check_recursion.py [--root DIR] [--cc gcc] [--build DIR]

Reads gcc's -fcallgraph-info of every library source (the folders of the
layer stack, at -O0 so that nothing is inlined away): the files the gcc
debug build writes beside its objects (--build build/debug: SConstruct
adds the flag there), or, without --build, from compiling each source
here, which takes half a minute.  Joins the call graphs, and finds every
cycle of direct calls (Tarjan's strongly connected components).  Each cycle must be one of the ALLOWED below, each bounded
by a constant (a depth the code checks, or log2 of a size), with the
reason; a new cycle, or an allowed one that is gone, prints a line and
exits 1.  Walks over terms keep their work in explicit stacks instead
(vm/term.c, vm/heap.c, trace/tr_encode.c), so a term's depth never turns
into native stack (docs/safety.md).

Calls through pointers are not in the graph: a native calling back into
VM code (vm_execute) recurses through one, bounded by VM_MAX_NESTING and
VM_NATIVE_STACK_RESERVE (vm/interp.c); natives are trusted C.
"""
import argparse
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile

FOLDERS = ['vm', 'loader', 'stacks', 'trace', 'breakpoints', 'profile', 'control', 'api']

# Each bounded cycle (its functions, sorted) and why it is bounded.
ALLOWED = {
    ('loader/ld_parse.c:lp_seq', 'loader/ld_parse.c:lp_term'):
        'a literal nests at most 100 levels (LitParser.depth), then it is an error',
    ('trace/tr_decode.c:print_at', 'trace/tr_decode.c:print_elems'):
        'payloads nest at most TR_ENCODE_DEPTH (16): the encoder cuts deeper terms; '
        'print_at checks PRINT_DEPTH',
    ('trace/tr_ms_compile.c:c_call', 'trace/tr_ms_compile.c:c_expr',
     'trace/tr_ms_compile.c:c_list_expr', 'trace/tr_ms_compile.c:c_shortcut',
     'trace/tr_ms_compile.c:c_tuple_expr'):
        'a match spec nests at most TR_MS_MAX_DEPTH (64): src_check refuses deeper ones first',
    ('trace/tr_ms_compile.c:c_pat_list', 'trace/tr_ms_compile.c:c_pat_tuple',
     'trace/tr_ms_compile.c:c_pattern'):
        'patterns are parts of the spec: at most TR_MS_MAX_DEPTH (64) levels (a list\'s '
        'cells are a loop in c_pat_list: tails cost no depth)',
    ('trace/tr_ms_compile.c:ground',):
        'parts of the spec: at most TR_MS_MAX_DEPTH (64) levels',
    ('trace/tr_ms_compile.c:src_check',):
        'checks its own depth against TR_MS_MAX_DEPTH (64) before going deeper',
    ('trace/tr_deliver.c:shape_elems',):
        'follows an event shape of trace/tr_events.def, a constant string with at '
        'most two levels of braces',
    ('tr_deliver', 'tr_deliver_to', 'tr_emit_flagged', 'tr_vm_emit',
     'trace/tr_vm_proc.c:suspend_for_room', 'trace/tr_vm_sess.c:emit_flagged',
     'trace/tr_vm_sess.c:sess_emit', 'trace/tr_vm_sess.c:to_own_tracer',
     'vm/mailbox.c:send_counted', 'vm/sched.c:sysmon_out', 'vm/sysmon.c:send', 'vm_hook_send',
     'vm_proc_switch_out', 'vm_sched_yield_to_next', 'vm_send', 'vm_send_to', 'vm_sysmon_out'):
        'tr_deliver_to sends a tracer its message, and vm_sysmon_out (a send event '
        'that waits for room in its ring switches out) the system monitor its '
        'message, with no sender (from NULL); vm_send_to writes a send event only '
        'for a sender (send_counted, its part after the count): one level each',
    ('vm/bif.c:iolist_walk',):
        'an iolist nests at most 100 levels (badarg beyond)',
    ('vm/bif.c:merge_sort',):
        'halves its range: depth log2 of the list length, at most 64',
    ('profile/pf_agg.c:fns_add',):
        'rehashes into a table twice as big, where the inner call finds room: one level',
    ('profile/pf_agg.c:vm_frame',):
        'a frame with a line interns its function\'s frame (line 0), which goes no '
        'deeper: one level',
    ('profile/pf_out.c:folded_node',):
        'walks the profile\'s call tree, as deep as the deepest sample: at most '
        '1 + ST_MAX_NATIVE + ST_MAX_VM (257) levels below the root (pf_agg.c keeps no more)',
    ('profile/pf_out.c:speedscope_node',):
        'walks the profile\'s call tree: at most 257 levels, as folded_node',
    ('profile/pf_svg.c:draw',):
        'walks the profile\'s call tree: at most 257 levels, as folded_node',
}

EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')


def compiled(root, cc, work, rel):
    """The -fcallgraph-info of one source, compiled into work."""
    base = os.path.join(work, rel.replace('/', '_'))
    r = subprocess.run([cc, '-std=gnu11', '-O0', '-I', root, '-DVM_DEBUG',
                        '-fcallgraph-info', '-c', rel, '-o', base + '.o',
                        '-dumpbase', rel.replace('/', '_'), '-dumpdir', work + '/'],
                       cwd=root, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit('%s: does not compile:\n%s' % (rel, r.stderr[-2000:]))
    return base + '.ci'


def built(build, rel):
    """The -fcallgraph-info the build wrote beside the source's object."""
    ci = os.path.join(build, rel[:-2] + '.ci')
    if not os.path.exists(ci):
        sys.exit('%s: missing (the gcc debug build writes it: scons mode=debug)' % ci)
    return ci


def callgraph(root, cc, work, build):
    """{caller: {callee}} over every source of FOLDERS."""
    graph = collections.defaultdict(set)
    for folder in FOLDERS:
        for src in sorted(glob.glob(os.path.join(root, folder, '*.c'))):
            rel = os.path.relpath(src, root)
            ci = built(build, rel) if build else compiled(root, cc, work, rel)
            text = open(ci).read()
            for a, b in EDGE.findall(text):
                if b != '__indirect_call':
                    graph[a].add(b)
    return graph


def cycles(graph):
    """The strongly connected components with a cycle, each sorted."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        # Iterative Tarjan: the graph may be deep.
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1 or node in graph.get(node, ()):
                        out.append(tuple(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--root', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument('--cc', default='gcc')
    ap.add_argument('--build', help='a gcc debug build whose objects have their .ci files')
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        found = set(cycles(callgraph(args.root, args.cc, work, args.build)))
    bad = False
    for c in sorted(found - set(ALLOWED)):
        print('recursion: %s: a cycle of direct calls not known to be bounded' % ' -> '.join(c))
        bad = True
    for c in sorted(set(ALLOWED) - found):
        print('recursion: %s: allowed but no longer a cycle (remove it from ALLOWED)'
              % ' -> '.join(c))
        bad = True
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
