"""Example models written in plain PyTorch, the way their users write them
(``docs/torch.md`` walks through them; the tests record, check and run each):

- :mod:`.tree_lstm`: a binary Tree-LSTM over SST parse trees, a loss at every node;
- :mod:`.child_sum`: a Child-Sum Tree-LSTM over trees with any number of children;
- :mod:`.dag_rnn`: a DAG-RNN with a cell per node kind over ``search random-dag`` graphs;
- :mod:`.bilstm_tagger`: a BiLSTM tagger over WikiNER sentences, whole-sentence calls;
- :mod:`.ggnn`: a gated graph network (Li et al. 2016) over synthetic molecule-like
  graphs, node by node; :mod:`.ggnn_pyg` is the same model on the same modules
  written for PyTorch Geometric (the batched baseline; needs ``torch_geometric``).

:mod:`.data` reads their inputs from batchlab's own traces, so that a
recording sees the same samples as ``engine record``, the SST fixture
files of ``data/`` (:func:`.data.sst_split`), and draws the molecule-like
graphs from a seeded generator; :mod:`.train_sst` trains :mod:`.tree_lstm`
on the SST train split in a plain PyTorch loop, eager or by ``bt.run``.
"""
