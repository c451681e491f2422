/*
 * vm/stw.c - stopping the world: every scheduler parked between two
 * processes while one thread changes code.  tracevm never does this on
 * its own; it exists for the breakpoint engine's stop-the-world baseline
 * (tvm_config.stop_the_world_tracing, breakpoints/bp_engine.c), which the
 * pausefree benchmark runs beside the non-blocking sequence to show the
 * difference in one binary.
 *
 * A parked scheduler is offline for thread progress, so a grace period
 * never waits for it; it parks only at the top of its loop, between two
 * processes, where it holds nothing of VM code or breakpoint data.
 */
#include "vm/sched.h"

#include "vm/qsbr.h"

/* Parks this scheduler until the world restarts; offline meanwhile. */
void vm_stw_park(SchedSystem *sys)
{
    vm_qsbr_offline();
    pthread_mutex_lock(&sys->stw_lock);
    sys->stw_parked++;
    pthread_cond_broadcast(&sys->stw_cond);
    while (vm_atomic_load_acquire(&sys->stw))
        pthread_cond_wait(&sys->stw_cond, &sys->stw_lock);
    sys->stw_parked--;
    pthread_mutex_unlock(&sys->stw_lock);
    vm_qsbr_online();
}

void vm_stw_begin(tvm_vm *vm)
{
    SchedSystem *sys = vm_sched_start(vm, vm->schedulers);
    Scheduler *self = vm_current_scheduler();
    int others = sys->n - (self && self->sys == sys ? 1 : 0);
    /* [SW1] release: pairs with [SW1'] in sched_main() (vm/sched.c). */
    vm_atomic_store_release(&sys->stw, 1);
    for (int i = 0; i < sys->n; i++) {
        /* Under the queue lock, so a scheduler about to sleep either saw
         * the flag or is asleep and gets the signal. */
        Scheduler *o = &sys->scheds[i];
        pthread_mutex_lock(&o->lock);
        pthread_cond_signal(&o->cond);
        pthread_mutex_unlock(&o->lock);
    }
    pthread_mutex_lock(&sys->stw_lock);
    while (sys->stw_parked < others)
        pthread_cond_wait(&sys->stw_cond, &sys->stw_lock);
    pthread_mutex_unlock(&sys->stw_lock);
}

void vm_stw_end(tvm_vm *vm)
{
    SchedSystem *sys = vm_sched_of(vm);
    pthread_mutex_lock(&sys->stw_lock);
    vm_atomic_store_release(&sys->stw, 0);
    pthread_cond_broadcast(&sys->stw_cond);
    pthread_mutex_unlock(&sys->stw_lock);
}
