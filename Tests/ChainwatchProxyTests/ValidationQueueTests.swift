import ChainwatchEventLoop
import ChainwatchLock
@testable import ChainwatchProxy
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The queue that takes chain validations off the event loops: jobs run on its threads, a full queue refuses (its
/// caller validates), and a loop keeps serving while a validation it asked for is running.
struct ValidationQueueTests {
    @Test func jobsRunOnTheQueuesThreadsAndAllComplete() throws {
        let queue = ValidationQueue(threads: 2, capacity: 1_000)
        let done = DispatchSemaphore(value: 0)
        let threads = Lock<Set<UInt>>([])
        let submitter = UInt(pthread_self())
        for _ in 0..<300 {
            #expect(queue.submit {
                threads.withLock { _ = $0.insert(UInt(pthread_self())) }
                done.signal()
            })
        }
        for _ in 0..<300 { #expect(done.wait(timeout: .now() + 10) == .success) }
        let seen = threads.withLock { $0 }
        #expect(!seen.contains(submitter))
        #expect(seen.count >= 1 && seen.count <= 2, "at most the queue's threads: \(seen.count)")
        let counts = queue.counts
        #expect(counts.onWorker == 300 && counts.refused == 0 && counts.waiting == 0)
        #expect(counts.mostWaiting >= 1 && counts.mostWaiting <= 300)
    }

    @Test func aFullQueueRefusesAndKeepsNothing() throws {
        let queue = ValidationQueue(threads: 1, capacity: 2)
        let running = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        let ran = Lock<[Int]>([])
        #expect(queue.submit { running.signal(); release.wait(); ran.withLock { $0.append(0) }; done.signal() })
        #expect(running.wait(timeout: .now() + 10) == .success)   // the only thread is busy; the next two wait
        for n in 1...2 { #expect(queue.submit { ran.withLock { $0.append(n) }; done.signal() }) }
        #expect(queue.counts.waiting == 2)
        #expect(!queue.submit { ran.withLock { $0.append(3) }; done.signal() })
        #expect(queue.counts.refused == 1)
        release.signal()
        for _ in 0..<3 { #expect(done.wait(timeout: .now() + 10) == .success) }
        #expect(done.wait(timeout: .now() + 0.2) == .timedOut)   // the refused job was not kept
        #expect(ran.withLock { $0 } == [0, 1, 2])
        #expect(queue.counts == .init(onWorker: 3, refused: 1, waiting: 0, mostWaiting: 2))
        // Room again once the jobs ran.
        #expect(queue.submit { done.signal() })
        #expect(done.wait(timeout: .now() + 10) == .success)
    }

    /// `stop` (the proxy's shutdown, before the process exits and OpenSSL with it): the jobs waiting are dropped,
    /// later ones refused, and it waits, bounded, for the running one. Before, the threads lived on, and a job still
    /// running at exit used OpenSSL as its exit handler freed it (a SIGSEGV under ThreadSanitizer).
    @Test func stopDropsWaitingJobsAndWaitsForTheRunningOne() throws {
        let queue = ValidationQueue(threads: 1)
        let running = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let ran = Lock<[Int]>([])
        #expect(queue.submit { running.signal(); release.wait(); ran.withLock { $0.append(0) } })
        #expect(running.wait(timeout: .now() + 10) == .success)
        for n in 1...3 { #expect(queue.submit { ran.withLock { $0.append(n) } }) }
        #expect(!queue.stop(waitingUpTo: 0.2), "the running job holds its thread")
        #expect(!queue.submit { ran.withLock { $0.append(4) } }, "refused once stopping: the caller runs it")
        release.signal()
        #expect(queue.stop(waitingUpTo: 10))
        #expect(ran.withLock { $0 } == [0], "the waiting jobs were dropped")
        #expect(ValidationQueue(threads: 2).stop(waitingUpTo: 0), "no thread started: nothing to wait for")
    }

    /// What `Inspector.judge` does with a chain the cache does not know: the work on the queue, the answer on the loop.
    /// While the work runs (here: until the test lets it finish), the loop runs its other callbacks.
    @Test func theLoopServesOthersWhileAValidationRuns() throws {
        let loopThread = try LoopThread(index: 0)
        defer { loopThread.stop() }
        let queue = ValidationQueue(threads: 1)
        let release = DispatchSemaphore(value: 0), served = DispatchSemaphore(value: 0), answered = DispatchSemaphore(value: 0)
        let answeredOnLoop = Lock<Bool?>(nil)
        loopThread.loop.execute {
            let loop = loopThread.loop
            #expect(queue.submit {
                release.wait()
                loop.execute {
                    answeredOnLoop.withLock { $0 = loopThread.isCurrent }
                    answered.signal()
                }
            })
        }
        loopThread.loop.execute { served.signal() }   // another tunnel's event, after the validation was queued
        #expect(served.wait(timeout: .now() + 10) == .success)
        #expect(answered.wait(timeout: .now() + 0.2) == .timedOut)
        release.signal()
        #expect(answered.wait(timeout: .now() + 10) == .success)
        #expect(answeredOnLoop.withLock { $0 } == true)
    }
}
