/*
 * tests/model/bp_protocol.pml - the breakpoint protocol (design.md §4,
 * beam_bp.c and erl_bif_trace.c) as a Promela model, checked by spin in
 * tests/sh/spin_model.sh.
 *
 * One function, NREADERS scheduler threads calling it, one writer running
 * the trace_pattern sequence for NOPS operations:
 *   op 1  add     (flags on, setting 1)   allocates record 1
 *   op 2  update  (setting 2)
 *   op 3  remove  (flags off)             record 1 idle, or unlinked and
 *                                         freed (spin tries both)
 *   op 4  add     (setting 1)             re-arms idle record 1 before
 *                                         the first wait, or allocates
 *                                         record 2
 *
 * A generation is two fields (fa, fb) written by two separate stores with
 * the same value, so a reader that mixes two writes (a torn read) sees
 * fa != fb.  A field value is the whole setting: 0 = flags off, 1 or 2 =
 * on with that match spec / tracer.
 *
 * "wait" is thread progress (breakpoints/bp_progress.c): the writer raises
 * need[i] for every reader and blocks until each reader has cleared it at
 * a quiescent state, i.e. between two calls.  A reader holds nothing
 * across a quiescent state.
 *
 * The model is sequentially consistent: waits whose only purpose is memory
 * ordering (publishing plain stores to other cores) are not distinguished
 * from free ones here.  It checks the interleavings.
 *
 * Properties (assertions in reader):
 *   (a) no reader reads or uses a freed record;
 *   (b) a reader sees one whole generation (fa == fb);
 *   (c) a call that starts after trace_pattern returned (done >= k when
 *       the call reads the first instruction) sees the setting of op k or
 *       of an op that started later.
 *
 * Consolidation is deferred to the start of the next engine call, as the
 * engine defers it after a trace_pattern.
 *
 * Seeded bug: -DSEEDED_BUG removes the wait after the flip of the active
 * index (and the disarm).  Consolidation then rewrites the old generation
 * while a reader that loaded the index before the flip is still reading
 * it: (b) fails.
 */

#define NREADERS 2
#define NOPS     4
#define NREC     3      /* record ids 1..2; 0 = no record */

#define R_UNUSED 0
#define R_LIVE   1
#define R_DEAD   2      /* unlinked, on the free list */
#define R_FREED  3

bool armed;             /* first instruction = generic breakpoint */
byte hdr;               /* function header -> breakpoint record (0 = none) */
byte active_ix;         /* global active index (0/1) */
byte fa[NREC * 2];      /* data[rec][gen], first field */
byte fb[NREC * 2];      /* data[rec][gen], second field */
byte rstate[NREC];
bool need[NREADERS];    /* thread progress: reader i must still pass a QS */
byte started;           /* trace_pattern calls begun */
byte done;              /* trace_pattern calls returned */
byte S[NOPS + 1];       /* S[k] = setting after op k (S[0] = untraced) */

#define D(r, g) ((r) * 2 + (g))

/* Thread progress: every reader passes a quiescent state after the wait
 * began (the ticket is taken after the writes before it). */
inline wait()
{
    atomic { need[0] = 1; need[1] = 1 };
    (need[0] == 0 && need[1] == 0)
}

/* Consolidate, deferred to the start of the next engine call (the
 * engine's bp_sync_record / bp_sync_all): copy active into staging (the
 * old generation, which no reader reads any more).  A record with no
 * flags stays linked as an idle record, or is unlinked (the engine keeps
 * up to BP_IDLE_MAX; spin tries both); an unlinked one is freed after
 * the next wait. */
inline consolidate()
{
    if
    :: pend ->
       st = 1 - active_ix;
       fa[D(r, st)] = fa[D(r, active_ix)];
       fb[D(r, st)] = fb[D(r, active_ix)];
       if
       :: fa[D(r, active_ix)] == 0 -> hdr = 0; rstate[r] = R_DEAD; dead = r
       :: fa[D(r, active_ix)] == 0 -> skip      /* idle */
       :: else -> skip
       fi;
       pend = 0
    :: else -> skip
    fi
}

/* Free what the last consolidation unlinked, after a wait that followed
 * it (the engine: right after the first wait of the call that unlinked
 * it). */
inline free_dead()
{
    if
    :: dead != 0 -> rstate[dead] = R_FREED; dead = 0
    :: else -> skip
    fi
}

inline trace_pattern(v)
{
    started++;
    consolidate();

    /* Stage: write the staging generation; link a new record (fresh).
     * Readers read only data[active_ix]; a new record's active generation
     * is 0, so a reader that finds it does nothing. */
    if
    :: hdr == 0 -> r = nextrec; nextrec++; rstate[r] = R_LIVE; fresh = 1
    :: else -> r = hdr; fresh = 0
    fi;
    st = 1 - active_ix;
    fa[D(r, st)] = v;
    fb[D(r, st)] = v;
    hdr = r;

    /* Arm early: a record that existed before this call (an idle one) is
     * armed before the first wait; its active generation is empty. */
    if
    :: v != 0 && !armed && !fresh -> armed = 1
    :: else -> skip
    fi;
    wait();
    free_dead();

    /* Arm a record this call created (one store), then wait.  Falls
     * through without a wait when there is nothing to arm, as in BEAM. */
    if
    :: v != 0 && !armed -> armed = 1; wait()
    :: else -> skip
    fi;

    /* Commit: flip the active index.  The staging generation was complete
     * before the previous wait. */
    active_ix = 1 - active_ix;

    /* Uninstall, right after the flip: disarm if the active flags are
     * all off.  The wait after it covers the flip and the disarm. */
    if
    :: fa[D(r, active_ix)] == 0 && armed -> armed = 0
    :: else -> skip
    fi;
#ifndef SEEDED_BUG
    wait();             /* no reader still reads the old generation, and
                         * none is inside a disarmed breakpoint */
#endif
    pend = 1;           /* consolidation: at the next engine call */
    done++
}

active proctype writer()
{
    byte r, st, dead;
    byte nextrec = 1;
    bool fresh, pend;
    trace_pattern(1);   /* add */
    trace_pattern(2);   /* update */
    trace_pattern(0);   /* remove */
    trace_pattern(1);   /* add again: the idle record, or a new one */
    /* A later engine call (a load, trace_info): the last consolidation,
     * a wait, the free. */
    consolidate();
    wait();
    free_dead()
}

proctype reader(byte id)
{
    byte snap, r, ai, a, b, seen, k;
    bool arm, ok;
    do
    :: /* A call starts: read the first instruction. */
       atomic { snap = done; arm = armed };
       if
       :: arm ->
          r = hdr;                        /* record via the function header */
          assert(r != 0);
          ai = active_ix;                 /* relaxed load of the index */
          assert(rstate[r] != R_FREED);   /* (a) */
          a = fa[D(r, ai)];
          assert(rstate[r] != R_FREED);   /* (a) */
          b = fb[D(r, ai)];
          /* use */
          assert(rstate[r] != R_FREED);   /* (a) */
          assert(a == b);                 /* (b) */
          seen = a
       :: else -> seen = 0
       fi;
       /* (c) seen is the setting of some op k, done-at-start <= k <= started */
       d_step {
          ok = 0; k = snap;
          do
          :: k <= started -> if :: S[k] == seen -> ok = 1 :: else -> skip fi; k++
          :: else -> break
          od;
          assert(ok);
       };
       /* Quiescent state, reported to thread progress; nothing held. */
       d_step {
          need[id] = 0;
          snap = 0; r = 0; ai = 0; a = 0; b = 0; seen = 0; k = 0; arm = 0; ok = 0
       }
    od
}

init
{
    atomic {
        S[0] = 0; S[1] = 1; S[2] = 2; S[3] = 0; S[4] = 1;
        run reader(0);
        run reader(1)
    }
}
