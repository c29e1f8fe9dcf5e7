def fib(n: int) -> list[int]:
    """Return the first n Fibonacci numbers."""
    a, b = 0, 1
    out = []
    for _ in range(n):
        out.append(a)
        a, b = b, a + b
    return out


class Point:
    def __init__(self, x=0.0, y=0.0):
        self.x, self.y = x, y

    def __repr__(self):
        return f"Point({self.x!r}, {self.y!r})"

if __name__ == "__main__":
    print(fib(10), Point(1, 2), {"k": [1, 2, 3]}, lambda: None)  # trailing comment    
