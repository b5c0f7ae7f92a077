"""The lab's instruments: look at a call the way PyTorch developers do.

* ``trace``        -- record the frames of a call (gdb's ``bt`` in the seed's Exercise 0)
* ``breakpoint``   -- capture the real Python stack when a chosen frame starts (pdb's ``where``)
* ``profiler``     -- operators seen by ``Dispatcher::call`` (RecordFunction / ``torch.profiler``)
* ``bench``        -- bytecode instruction counts, timings, callgrind (``torch.utils.benchmark``)
* ``keyset_view``  -- static HTML / text pictures of a DispatchKeySet
* ``explorer``     -- an ipywidgets key-set explorer with a static fallback
* ``callgraph``    -- a traced call as a graphviz graph, with a text tree fallback
* ``frame_names``  -- the table mapping lab frames to the PyTorch frames they stand for

This package imports nothing heavy: each instrument is a submodule loaded on first use.
"""
