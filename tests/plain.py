"""Plain NumPy versions of Algorithms 1 and 2, written from the paper and fed the same random draws.

They use dense data and their own gradient formula, so they share nothing with isparse but the
random draws: worker i's draws at iteration t from ``isparse.compression.sampling.Sampler(seed)``, asked one
worker at a time (the library asks for a whole host at once).
"""

import numpy as np

from isparse.compression.sampling import BLOCKS, COINS, EXAMPLES


def local_grad(A, b, rows, n, N, lam, x):
    Ai, bi = A[rows], b[rows]
    return (n / N) * (Ai.T @ (-bi / (1 + np.exp(bi * (Ai @ x))))) + lam * x


def draw(sampler, i, t, m, tau_m, size, d):
    """Coordinates of U_i^t: worker i's tau_m-nice block sample at iteration t."""
    U = sampler.subsets(BLOCKS, [i], t, m, tau_m)[0]
    coords = (U[:, None] * size + np.arange(size)).ravel()
    return coords[coords < d]


def ibcd(A, b, parts, lam, size, tau_m, gamma, T, sampler):
    """Algorithm 1: x <- (1/n) sum_i (x - gamma (grad f_i(x))_{U_i})."""
    N, d = A.shape
    n, m = len(parts), -(-d // size)
    x, out = np.zeros(d), [np.zeros(d)]
    for t in range(T):
        proposals = []
        for i in range(n):
            g = local_grad(A, b, parts[i], n, N, lam, x)
            c = draw(sampler, i, t, m, tau_m, size, d)
            xi = x.copy()
            xi[c] -= gamma * g[c]
            proposals.append(xi)
        x = np.mean(proposals, axis=0)
        out.append(x)
    return np.array(out)


def isega(A, b, parts, lam, size, tau_m, gamma, T, sampler, prox=lambda v, step: v):
    """Algorithm 2: g_i = h_i + (1/tau)(grad f_i - h_i)_{U_i}; h_i += (grad f_i - h_i)_{U_i}; x <- prox(x - gamma mean g_i)."""
    N, d = A.shape
    n, m = len(parts), -(-d // size)
    tau = tau_m / m
    h = np.zeros((n, d))
    x, out = np.zeros(d), [np.zeros(d)]
    for t in range(T):
        gs = []
        for i in range(n):
            grad = local_grad(A, b, parts[i], n, N, lam, x)
            c = draw(sampler, i, t, m, tau_m, size, d)
            gi = h[i].copy()
            gi[c] += (grad[c] - h[i][c]) / tau
            h[i][c] = grad[c]
            gs.append(gi)
        x = prox(x - gamma * np.mean(gs, axis=0), gamma)
        out.append(x)
    return np.array(out)


def example_grad(A, b, rows, n, N, lam, x, j):
    """grad f_ij for the j-th example of the shard ``rows``: f_ij = (n l_i/N) phi_j + (lam/2)||x||^2."""
    a, bj = A[rows[j]], b[rows[j]]
    return (n * len(rows) / N) * (-bj / (1 + np.exp(bj * (a @ x)))) * a + lam * x


def ibgd(A, b, parts, lam, tau, gamma, T, sampler):
    """Algorithm 3: worker i sends grad f_i(x) with probability tau; x <- x - (gamma/n) sum of what was sent."""
    N, d = A.shape
    n = len(parts)
    x, out = np.zeros(d), [np.zeros(d)]
    for t in range(T):
        total = np.zeros(d)
        for i in range(n):
            if tau >= 1 or sampler.uniforms(COINS, [i], t, 1)[0, 0] < tau:
                total += local_grad(A, b, parts[i], n, N, lam, x)
        x = x - gamma / n * total
        out.append(x)
    return np.array(out)


def isaga(A, b, parts, lam, size, tau_m, gamma, T, sampler):
    """Algorithm 5: worker i draws U_i, then j; sends (grad f_ij - alpha_ij + mean_j alpha_ij)_{U_i}."""
    N, d = A.shape
    n, m = len(parts), -(-d // size)
    tables = [np.zeros((len(p), d)) for p in parts]
    x, out = np.zeros(d), [np.zeros(d)]
    for t in range(T):
        total = np.zeros(d)
        for i in range(n):
            c = draw(sampler, i, t, m, tau_m, size, d)
            j = int(np.floor(sampler.uniforms(EXAMPLES, [i], t, 2)[0, 0] * len(parts[i])))   # one uniform example
            g = example_grad(A, b, parts[i], n, N, lam, x, j)
            total[c] += g[c] - tables[i][j, c] + tables[i].mean(0)[c]
            tables[i][j, c] = g[c]
        x = x - gamma / n * total
        out.append(x)
    return np.array(out)


def isgd(A, b, parts, lam, size, tau_m, gamma, T, sampler, batch):
    """Algorithm 6 with a constant step: minibatch gradient of f_i, sparsified on U_i."""
    N, d = A.shape
    n, m = len(parts), -(-d // size)
    x, out = np.zeros(d), [np.zeros(d)]
    for t in range(T):
        total = np.zeros(d)
        for i in range(n):
            c = draw(sampler, i, t, m, tau_m, size, d)
            idx = sampler.subsets(EXAMPLES, [i], t, np.array([len(parts[i])]), batch)[0]   # batch distinct examples
            g = np.mean([example_grad(A, b, parts[i], n, N, lam, x, j) for j in idx], axis=0)
            total[c] += g[c]
        x = x - gamma / n * total
        out.append(x)
    return np.array(out)


def saga_single_node(A, b, lam, gamma, T, sampler):
    """Textbook SAGA on (1/N) sum_j phi_j + (lam/2)||x||^2 with a zero table, j uniform from worker 0's draws."""
    N, d = A.shape
    table = np.zeros((N, d))
    x, out = np.zeros(d), [np.zeros(d)]
    for t in range(T):
        j = int(np.floor(sampler.uniforms(EXAMPLES, [0], t, 2)[0, 0] * N))
        g = -b[j] / (1 + np.exp(b[j] * (A[j] @ x))) * A[j] + lam * x
        x = x - gamma * (g - table[j] + table.mean(0))
        table[j] = g
        out.append(x)
    return np.array(out)
