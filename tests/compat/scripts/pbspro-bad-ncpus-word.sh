#!/bin/bash
#PBS -l select=1:ncpus=four
echo "never submitted"
