import Foundation

/// Where chains the verdict cache does not know are validated: threads of their own, not the event loops. A new chain
/// costs about 0.3 ms (a decoded leaf, one signature) and a hostile one of 16 new certificates several milliseconds
/// each time it is sent; on a loop that time stalls every other tunnel of the loop. A cached verdict is answered on the
/// loop (microseconds) and never comes here.
///
/// Bounded: at most `capacity` jobs wait. `submit` refuses more, and the caller then validates on its own thread, as
/// chainwatch did before this queue existed: a flood of new chains slows the loops that bring it, and is never turned
/// into missing verdicts. Threads start on first use, up to `threadCount`, and live until `stop`.
public final class ValidationQueue: @unchecked Sendable {
    /// Threads that validate (started as jobs come, never more).
    public let threadCount: Int
    /// The most jobs waiting for a thread.
    public let capacity: Int
    private let condition = NSCondition()
    // Guarded by `condition`:
    private var jobs: [@Sendable () -> Void] = []
    /// Index of the next job in `jobs`; the ones before it have run (the array drops them in batches, not per job).
    private var head = 0
    /// Threads started and not returned from `work` (they return only after `stop`).
    private var started = 0
    private var idle = 0
    private var stopping = false
    private var tally = Counts()

    /// What the queue has done since start, for `/metrics`.
    public struct Counts: Equatable, Sendable {
        /// Jobs run on a validation thread.
        public var onWorker = 0
        /// Jobs refused because `capacity` were waiting (their callers ran them).
        public var refused = 0
        /// Jobs waiting now.
        public var waiting = 0
        /// The most that ever waited at once.
        public var mostWaiting = 0
    }

    /// - Parameters:
    ///   - threads: validation threads (the proxy starts one per event loop).
    ///   - capacity: jobs that may wait; each holds a chain (a few KiB, at most the 16 certificates considered).
    public init(threads: Int, capacity: Int = 1_024) {
        precondition(threads >= 1 && capacity >= 1, "ValidationQueue needs a thread and room for a job")
        threadCount = threads
        self.capacity = capacity
    }

    public var counts: Counts {
        condition.lock(); defer { condition.unlock() }
        var counts = tally
        counts.waiting = jobs.count - head
        return counts
    }

    /// Queues `job` for a validation thread. Returns false, and keeps nothing, when `capacity` jobs already wait: the
    /// caller runs the job itself.
    public func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        let waiting = jobs.count - head
        guard waiting < capacity, !stopping else {
            tally.refused += 1
            condition.unlock()
            return false
        }
        jobs.append(job)
        tally.mostWaiting = max(tally.mostWaiting, waiting + 1)
        let start = idle == 0 && started < threadCount
        if start { started += 1 }
        condition.unlock()
        // Signalled after the unlock: a thread woken while the lock was still held could go straight back to sleep on
        // the lock, a futex wait and wake more (strace, cold TLS 1.3: futex wakes 3.70 -> 3.23 and waits 1.14 -> 0.69
        // per connection; bench/RESULTS.md). A thread that is not waiting yet finds the job when it next takes the lock.
        condition.signal()
        if start {
            let thread = Thread { [self] in work() }
            thread.name = "chainwatch-validate"
            thread.start()
        }
        return true
    }

    /// Stops the threads: the jobs still waiting are dropped (whoever submitted them has stopped: the loops a
    /// verdict would go back to), later `submit`s are refused (their callers run them), and each thread returns once
    /// its job is done. Waits up to `timeout` seconds for that; whether every thread returned.
    public func stop(waitingUpTo timeout: TimeInterval) -> Bool {
        condition.lock(); defer { condition.unlock() }
        stopping = true
        jobs.removeAll()
        head = 0
        condition.broadcast()
        let deadline = Date(timeIntervalSinceNow: timeout)
        while started > 0 {
            if !condition.wait(until: deadline) { return started == 0 }
        }
        return true
    }

    private func work() {
        while true {
            condition.lock()
            idle += 1
            while head == jobs.count, !stopping { condition.wait() }
            idle -= 1
            if stopping {
                started -= 1
                condition.broadcast()   // `stop` waits for this
                condition.unlock()
                return
            }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64, head * 2 >= jobs.count {   // never empty under steady load: drop what ran
                jobs.removeFirst(head)
                head = 0
            }
            tally.onWorker += 1
            condition.unlock()
            job()
        }
    }
}
