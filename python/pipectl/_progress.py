"""run(progress=True): a tqdm bar when tqdm is installed, else a plain line on stderr."""

import sys
import time


class Progress:
    """Told of each completed batch (from the thread that runs the pipeline), in order."""

    def __init__(self, name, total):
        self.name, self.total, self.done = name, total, 0
        self.t0 = self.shown = time.monotonic()
        self.bar = None
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            self.bar = tqdm(total=total, desc=name, unit="batch", leave=True)

    def update(self, done, total):
        step, self.done = done - self.done, done
        if self.bar is not None:
            self.bar.update(step)
            return
        now = time.monotonic()
        if now - self.shown < 0.1 and done < total:
            return
        self.shown = now
        rate = done / (now - self.t0) if now > self.t0 else 0.0
        eta = (total - done) / rate if rate > 0 else 0.0
        sys.stderr.write(f"\r{self.name}: {done}/{total} batches, {rate:.1f}/s, ETA {eta:.0f} s ")
        sys.stderr.flush()

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.done:
            sys.stderr.write("\n")
            sys.stderr.flush()
