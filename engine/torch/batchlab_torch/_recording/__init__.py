"""Recording (internal): the user's eager forward traced call by call
(:mod:`.tracer`, :mod:`.record`) into a graph of call kinds
(:mod:`.graph`), each kind's first call lowered to batchlab's op set
(:mod:`.lower`, :mod:`.cell`) and the whole written as a model folder
(:mod:`.folder`). The public names are re-exported by ``batchlab_torch``."""
