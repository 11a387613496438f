//! Optimisers over a model's parameters (per role, per cell value — the
//! shape of [`crate::model::RoleModel::params`]), updated in place.

use serde::{Deserialize, Serialize};

/// Per role, per value: a tensor (empty for values that are not parameters).
pub type Tensors = Vec<Vec<Vec<f32>>>;

/// Which update rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// `p −= lr · g`.
    Sgd,
    /// Adam (Kingma & Ba 2015) with bias correction.
    Adam {
        /// First-moment decay.
        beta1: f32,
        /// Second-moment decay.
        beta2: f32,
        /// Denominator guard.
        eps: f32,
    },
}

/// An optimiser and its state (saved in checkpoints).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Optimizer {
    /// The rule.
    pub rule: Rule,
    /// Learning rate.
    pub lr: f32,
    /// Rescale the gradients when their global L2 norm exceeds this.
    pub clip: Option<f32>,
    /// Steps taken.
    pub steps: u64,
    /// Adam's first and second moments (empty for SGD until used).
    m: Tensors,
    v: Tensors,
}

impl Optimizer {
    /// A fresh optimiser.
    pub fn new(rule: Rule, lr: f32, clip: Option<f32>) -> Optimizer {
        Optimizer {
            rule,
            lr,
            clip,
            steps: 0,
            m: Vec::new(),
            v: Vec::new(),
        }
    }

    /// Adam with the usual constants (0.9, 0.999, 1e-8).
    pub fn adam(lr: f32, clip: Option<f32>) -> Optimizer {
        Optimizer::new(
            Rule::Adam {
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
            },
            lr,
            clip,
        )
    }

    /// Applies one step to `params` with `grads` (same shapes); returns the
    /// gradients' global L2 norm before clipping.
    pub fn step(&mut self, params: &mut Tensors, grads: &Tensors) -> f64 {
        let norm = grads
            .iter()
            .flatten()
            .flatten()
            .map(|&g| f64::from(g) * f64::from(g))
            .sum::<f64>()
            .sqrt();
        let scale = match self.clip {
            Some(c) if norm > f64::from(c) && norm > 0.0 => (f64::from(c) / norm) as f32,
            _ => 1.0,
        };
        self.steps += 1;
        match self.rule {
            Rule::Sgd => {
                for (p, g) in params.iter_mut().flatten().zip(grads.iter().flatten()) {
                    for (p, &g) in p.iter_mut().zip(g) {
                        *p -= self.lr * scale * g;
                    }
                }
            }
            Rule::Adam { beta1, beta2, eps } => {
                if self.m.is_empty() {
                    let zeros: Tensors = params
                        .iter()
                        .map(|r| r.iter().map(|t| vec![0.0; t.len()]).collect())
                        .collect();
                    self.m = zeros.clone();
                    self.v = zeros;
                }
                let t = self.steps as i32;
                let c1 = 1.0 - beta1.powi(t);
                let c2 = 1.0 - beta2.powi(t);
                let it = params
                    .iter_mut()
                    .flatten()
                    .zip(grads.iter().flatten())
                    .zip(self.m.iter_mut().flatten().zip(self.v.iter_mut().flatten()));
                for ((p, g), (m, v)) in it {
                    for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut())
                    {
                        let g = g * scale;
                        *m = beta1 * *m + (1.0 - beta1) * g;
                        *v = beta2 * *v + (1.0 - beta2) * g * g;
                        *p -= self.lr * (*m / c1) / ((*v / c2).sqrt() + eps);
                    }
                }
            }
        }
        norm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quadratic(opt: &mut Optimizer) -> f32 {
        // Minimise (p − 3)²: gradient 2(p − 3).
        let mut p: Tensors = vec![vec![vec![0.0]]];
        for _ in 0..500 {
            let g = vec![vec![vec![2.0 * (p[0][0][0] - 3.0)]]];
            opt.step(&mut p, &g);
        }
        p[0][0][0]
    }

    #[test]
    fn sgd_and_adam_minimise_a_quadratic() {
        assert!((quadratic(&mut Optimizer::new(Rule::Sgd, 0.1, None)) - 3.0).abs() < 1e-4);
        assert!((quadratic(&mut Optimizer::adam(0.05, None)) - 3.0).abs() < 1e-2);
    }

    #[test]
    fn clipping_scales_the_step_and_reports_the_norm() {
        let mut o = Optimizer::new(Rule::Sgd, 1.0, Some(1.0));
        let mut p: Tensors = vec![vec![vec![0.0, 0.0], vec![]]];
        let norm = o.step(&mut p, &vec![vec![vec![3.0, 4.0], vec![]]]);
        assert_eq!(norm, 5.0);
        assert!((p[0][0][0] + 0.6).abs() < 1e-6 && (p[0][0][1] + 0.8).abs() < 1e-6);
    }
}
