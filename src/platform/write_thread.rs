//! A thread of its own for writes that can block for good (a paused terminal, a pipe nobody
//! reads), so no runtime worker stalls on them. The queue is unbounded: the callers bound it
//! (an attempt's output awaits each chunk's result). Writes keep their order, and the thread
//! drops its reference to a buffer before reporting, so the caller can reuse it.

use std::io;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

/// Where a job's bytes go; `T` tells the sink which of its targets (e.g. stdout or stderr).
pub(crate) trait Sink<T>: Send + 'static {
    fn write(&mut self, target: T, bytes: &[u8]) -> io::Result<()>;
}

struct Job<T> {
    target: T,
    bytes: Arc<Vec<u8>>,
    done: oneshot::Sender<io::Result<()>>,
}

/// The thread and its queue; dropping this closes the queue and lets the thread end. It is
/// not joined: a thread blocked on a sink that never drains must not hold up the handler.
pub(crate) struct WriteThread<T> {
    jobs: Sender<Job<T>>,
    _thread: JoinHandle<()>,
}

impl<T: Send + 'static> WriteThread<T> {
    pub(crate) fn start(name: &str, mut sink: impl Sink<T>) -> io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job<T>>();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                for job in queue {
                    let result = sink.write(job.target, &job.bytes);
                    drop(job.bytes);
                    let _ = job.done.send(result);
                }
            })?;
        Ok(Self {
            jobs,
            _thread: thread,
        })
    }

    /// The receiver yields the result once the bytes are written.
    pub(crate) fn submit(
        &self,
        target: T,
        bytes: Arc<Vec<u8>>,
    ) -> oneshot::Receiver<io::Result<()>> {
        let (done, written) = oneshot::channel();
        if let Err(mpsc::SendError(job)) = self.jobs.send(Job {
            target,
            bytes,
            done,
        }) {
            let _ = job.done.send(Err(io::Error::other("write thread stopped")));
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    type Writes = Arc<Mutex<Vec<(u8, Vec<u8>)>>>;

    struct Recorder(Writes);

    impl Sink<u8> for Recorder {
        fn write(&mut self, target: u8, bytes: &[u8]) -> io::Result<()> {
            if target == 0 {
                return Err(io::Error::other("refused"));
            }
            self.0.lock().unwrap().push((target, bytes.to_vec()));
            Ok(())
        }
    }

    #[tokio::test]
    async fn writes_in_order_and_hands_the_buffer_back() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let thread = WriteThread::start("test-writer", Recorder(seen.clone())).unwrap();
        let bytes = Arc::new(b"first".to_vec());
        thread.submit(1, bytes.clone()).await.unwrap().unwrap();
        assert_eq!(
            Arc::strong_count(&bytes),
            1,
            "the thread let go of the buffer"
        );
        thread
            .submit(2, Arc::new(b"second".to_vec()))
            .await
            .unwrap()
            .unwrap();
        let error = thread.submit(0, Arc::new(Vec::new())).await.unwrap();
        assert_eq!(error.unwrap_err().to_string(), "refused");
        assert_eq!(
            *seen.lock().unwrap(),
            [(1, b"first".to_vec()), (2, b"second".to_vec())]
        );
    }
}
