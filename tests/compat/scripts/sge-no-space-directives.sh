#!/bin/bash
#$-N tight
#$-cwd
#$-l h_rt=0:10:0
echo "no space after the prefix"
